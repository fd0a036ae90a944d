"""Error counters per site and source kind: the state of a round that lives across scrapes."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

from exporter.metrics.catalog import MetricDef
from exporter.metrics.samples import Sample, sample


class ErrorCounts:
    def __init__(self) -> None:
        self._counts: Counter[tuple[str, MetricDef, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, site: str, metric: MetricDef, kind: str) -> None:
        with self._lock:
            self._counts[(site, metric, kind)] += 1

    def samples(self, site: str, metric: MetricDef, kinds: Sequence[str]) -> list[Sample]:
        """Every kind, from 0, so that rate() sees a site's first error of each kind."""
        with self._lock:
            return [sample(metric, self._counts[(site, metric, kind)], kind=kind) for kind in kinds]
