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
        # The last background reading served, and its read time's sample: made once per
        # reading, so that it stays the same object and value between refreshes.
        self._dated: tuple[Reading, list[Sample]] = (NOT_READ, [])

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
            *reader.report(self.source, reading),
            *(self._read_time(reading) if self._refresh is not None else ()),
            *reader.error_samples(self._site, self.source),
        ]

    def _read_time(self, reading: Reading) -> list[Sample]:
        if self._dated[0] is not reading:
            self._dated = (reading, self._reader.read_times((self.source,), (reading,)))
        return self._dated[1]

    def _read(self, previous: Reading | None) -> Reading:
        return self._reader.read(self.source, self._context, self._site, previous or NOT_READ)
