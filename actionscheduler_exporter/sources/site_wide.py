"""A site-wide source (not tied to a table prefix) read as its freshness says."""

from __future__ import annotations

from typing import Generic, TypeVar

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.sources.background import BackgroundRefresh
from actionscheduler_exporter.sources.reader import SourceReader
from actionscheduler_exporter.sources.source import NOT_READ, Reading, Source
from actionscheduler_exporter.timing import Deadline

ContextT = TypeVar("ContextT")


class SiteWideSource(Generic[ContextT]):
    def __init__(
        self, source: Source[ContextT], context: ContextT, site: SiteConfig, reader: SourceReader
    ) -> None:
        self.source = source
        self._context = context
        self._site = site.name
        self._reader = reader
        self._freshness = freshness = source.freshness(site)
        # Constant values (the configuration) are read once and carry no health.
        self._constant = tuple(source.read(context)) if freshness.constant else None
        self._refresh = (
            BackgroundRefresh[Reading](
                f"{source.name}-{site.name}",
                freshness.interval,
                self._read,
                reader.clock,
                wait_each=freshness.wait_each,
            )
            if freshness.background
            else None
        )

    @property
    def may_wait(self) -> bool:
        """Whether `samples` may wait (for a refresh, or a reading of its own)."""
        return self._constant is None

    def samples(self, until: Deadline) -> list[Sample]:
        """The source's samples with its health and errors, waiting for a background
        refresh until `until` at the latest."""
        if self._constant is not None:
            return list(self._constant)
        if self._refresh is not None:
            reading = self._refresh.latest(until.left()) or NOT_READ
        else:
            reading = self._read(None)
        reader = self._reader
        return [
            *reader.report(self.source, reading, aged=self._refresh is not None),
            *reader.error_samples(self._site, self.source),
        ]

    def _read(self, previous: Reading | None) -> Reading:
        return self._reader.read(self.source, self._context, self._site, previous or NOT_READ)
