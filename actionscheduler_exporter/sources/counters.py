"""Counters per site that live across scrapes: errors by kind, database time by tier."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial

from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels, Sample, labels_of, value_of


class SiteCounters:
    def __init__(self) -> None:
        self._counts: defaultdict[tuple[str, MetricDef, str], float] = defaultdict(float)
        self._lock = threading.Lock()
        # The samples of a site's counter as last made, until one of its counts changes
        # (errors are rare: a thousand sites' scrape would make them all again each time).
        self._made: dict[tuple[str, MetricDef], dict[tuple[tuple[str, ...], str], list[Sample]]]
        self._made = {}
        self._meters: dict[tuple[str, str, str], Callable[[float], None]] = {}
        self._label_sets: dict[tuple[MetricDef, tuple[tuple[str, ...], str]], list[Labels]] = {}

    def add(self, site: str, metric: MetricDef, key: str, amount: float = 1) -> None:
        with self._lock:
            self._counts[(site, metric, key)] += amount
            self._made.pop((site, metric), None)

    def samples(
        self, site: str, metric: MetricDef, keys: Sequence[str], label: str = "kind"
    ) -> list[Sample]:
        """Every key, from 0, so that rate() sees a site's first error of each kind."""
        shape = (tuple(keys), label)
        with self._lock:
            made_for = self._made.setdefault((site, metric), {})
            made = made_for.get(shape)
            if made is None:
                made = made_for[shape] = [
                    Sample(metric, value_of(self._counts[(site, metric, key)]), labels)
                    for key, labels in zip(keys, self._labels(metric, shape), strict=True)
                ]
            return list(made)

    def _labels(self, metric: MetricDef, shape: tuple[tuple[str, ...], str]) -> list[Labels]:
        """Each key's labels, made once per shape (a site's database time changes in every
        round: its samples are made again at every scrape)."""
        made = self._label_sets.get((metric, shape))
        if made is None:
            keys, label = shape
            made = [labels_of(metric, **{label: key}) for key in keys]
            self._label_sets[(metric, shape)] = made
        return made

    def meter(self, site: str, metric: MetricDef, key: str) -> Callable[[float], None]:
        """Adds each amount it is called with to one counter (a session's database time);
        made once per counter (asked for per collector and round)."""
        made = self._meters.get((site, metric.name, key))
        if made is None:
            made = self._meters[(site, metric.name, key)] = partial(self.add, site, metric, key)
        return made
