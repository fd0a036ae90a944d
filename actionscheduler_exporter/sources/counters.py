"""Counters per site that live across scrapes: errors by kind, database time by tier."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence

from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Sample, sample


class SiteCounters:
    def __init__(self) -> None:
        self._counts: defaultdict[tuple[str, MetricDef, str], float] = defaultdict(float)
        self._lock = threading.Lock()

    def add(self, site: str, metric: MetricDef, key: str, amount: float = 1) -> None:
        with self._lock:
            self._counts[(site, metric, key)] += amount

    def samples(
        self, site: str, metric: MetricDef, keys: Sequence[str], label: str = "kind"
    ) -> list[Sample]:
        """Every key, from 0, so that rate() sees a site's first error of each kind."""
        with self._lock:
            return [
                sample(metric, self._counts[(site, metric, key)], **{label: key}) for key in keys
            ]

    def meter(self, site: str, metric: MetricDef, key: str) -> Callable[[float], None]:
        """Adds each amount it is called with to one counter (a session's database time)."""
        return lambda amount: self.add(site, metric, key, amount)
