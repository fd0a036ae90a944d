"""A site-wide source (not tied to a table prefix) read as its freshness says."""

from __future__ import annotations

from typing import Generic, TypeVar

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.rounds.observer import Observer
from actionscheduler_exporter.sources.background import BackgroundRefresh
from actionscheduler_exporter.sources.source import NOT_READ, Reading, Source

ContextT = TypeVar("ContextT")


class SiteWideSource(Generic[ContextT]):
    def __init__(
        self, source: Source[ContextT], context: ContextT, site: SiteConfig, observer: Observer
    ) -> None:
        self.source = source
        self._context = context
        self._site = site.name
        self._observer = observer
        self._freshness = freshness = source.freshness(site)
        # Constant values (the configuration) are read once and carry no health.
        self._constant = tuple(source.read(context)) if freshness.constant else None
        self._refresh = (
            BackgroundRefresh[Reading](
                f"{source.name}-{site.name}",
                freshness.interval,
                self._read,
                observer.clock,
                wait_each=freshness.wait_each,
            )
            if freshness.background
            else None
        )

    def samples(self, budget: float) -> list[Sample]:
        """The source's samples with its health and errors, waiting at most `budget`
        seconds for a background refresh."""
        if self._constant is not None:
            return list(self._constant)
        if self._refresh is not None:
            reading = self._refresh.latest(budget) or NOT_READ
        else:
            reading = self._read(None)
        observer = self._observer
        return [
            *observer.report(self.source, reading, aged=self._refresh is not None),
            *observer.error_samples(self._site, self.source),
        ]

    def _read(self, previous: Reading | None) -> Reading:
        return self._observer.read(self.source, self._context, self._site, previous or NOT_READ)
