"""The heavy tier: collectors whose queries grow with the table, refreshed in the background.

Totals over all complete and failed actions and their per-hook and per-group breakdowns
scan large sets: seconds per query at ten million actions. Running them on every scrape
would make the exporter the heaviest client of the shop's database, so they are a
background source (`BackgroundRefresh`): a scrape that finds them older than
`heavy_interval` starts a refresh and serves the values it has. A refresh uses a
connection of its own (closed when it ends, so the hot tier never waits behind a long
scan) and `heavy_query_timeout`; a failed collector keeps its last good values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from exporter.collectors.context import Collector, DatabaseContext
from exporter.config.model import SiteConfig
from exporter.db.session import Session
from exporter.db.tables import TableNames
from exporter.metrics.samples import Sample
from exporter.rounds.observer import Observer
from exporter.sources.background import BackgroundRefresh
from exporter.sources.source import NOT_READ, Reading

# Readings by (table prefix, collector name).
Readings = dict[tuple[str, str], Reading]


class HeavyTier:
    def __init__(
        self,
        site: SiteConfig,
        collectors: Sequence[Collector],
        observer: Observer,
    ) -> None:
        self._site = site
        self.collectors = tuple(collectors)
        self._observer = observer
        self._prefixes: tuple[str, ...] = ()
        self._labels: dict[str, str] = {}
        self._refresh = BackgroundRefresh[Readings](
            f"heavy-{site.name}", site.heavy_interval, self._read_all, observer.clock
        )

    def samples(self, labels: dict[str, str], budget: float) -> dict[str, list[Sample]]:
        """Each prefix's heavy samples (values and health), by table prefix.

        `labels` maps the prefixes whose tables answered in this round to their site labels;
        a refresh that is due starts for them. The exporter's first refresh is waited for
        up to `budget` seconds, so that a fresh exporter serves every family at once on a
        store of ordinary size."""
        if not labels:  # nothing answered: no refresh, and no stale values to serve
            return {}
        self._prefixes = tuple(labels)
        self._labels.update(labels)
        readings = self._refresh.latest(budget) or {}
        return {
            prefix: [
                item
                for collector in self.collectors
                for item in self._observer.report(
                    collector, readings.get((prefix, collector.name), NOT_READ), aged=True
                )
            ]
            for prefix in labels
        }

    def problems(self, prefix: str) -> list[str]:
        """Why the heavy collectors of a prefix failed at their last refresh, if they did."""
        readings = self._refresh.peek() or {}
        return [
            f"{collector.name}: {reading.problem}"
            for collector in self.collectors
            if (reading := readings.get((prefix, collector.name))) and not reading.ok
        ]

    def served(self, label: str) -> list[Sample]:
        """The last readings for a site label, without starting a refresh (for a scrape
        that gives up waiting on a round)."""
        readings = self._refresh.peek() or {}
        prefixes = [prefix for prefix, known in self._labels.items() if known == label]
        return [
            item
            for prefix in prefixes
            for collector in self.collectors
            for item in self._observer.report(
                collector, readings.get((prefix, collector.name), NOT_READ), aged=True
            )
        ]

    def _read_all(self, previous: Readings | None) -> Readings:
        readings = dict(previous or {})
        site = dataclasses.replace(self._site, query_timeout=self._site.heavy_query_timeout)
        session = Session(site, check_grants=False)
        try:
            for prefix in self._prefixes:
                context = DatabaseContext(session, TableNames(prefix), self._site, {})
                for collector in self.collectors:
                    key = (prefix, collector.name)
                    readings[key] = self._observer.read(
                        collector, context, self._labels[prefix], readings.get(key, NOT_READ)
                    )
        finally:
            session.close()
        return readings
