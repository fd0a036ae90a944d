"""Counters per site that live across scrapes: errors by kind, database time by tier."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial

from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels, Sample, labels_of, value_of

# A counter as a site reports it: its metric, every key (from 0), and the keys' label.
Counter = tuple[MetricDef, Sequence[str], str]


class _Made:
    """The samples of one counter of a site in one shape (its keys, its label), and the
    keys whose counts changed since they were made."""

    __slots__ = ("places", "samples", "stale")

    def __init__(self, keys: Sequence[str], samples: tuple[Sample, ...]) -> None:
        self.places = {key: place for place, key in enumerate(keys)}
        self.samples = samples
        self.stale: set[str] = set()


class SiteCounters:
    def __init__(self) -> None:
        self._counts: defaultdict[tuple[str, MetricDef, str], float] = defaultdict(float)
        self._lock = threading.Lock()
        # The samples of a site's counter as last made, each kept while its count stays:
        # a site's hot database time changes in every round, its other tiers' and its
        # errors rarely, and a sample made anew is compared again by the writer, a thousand
        # sites' times every kind at every scrape.
        self._made: dict[tuple[str, MetricDef], dict[tuple[tuple[str, ...], str], _Made]] = {}
        self._meters: dict[tuple[str, str, str], Callable[[float], None]] = {}
        self._label_sets: dict[tuple[MetricDef, tuple[tuple[str, ...], str]], list[Labels]] = {}

    def add(self, site: str, metric: MetricDef, key: str, amount: float = 1) -> None:
        with self._lock:
            self._counts[(site, metric, key)] += amount
            made_for = self._made.get((site, metric))
            for made in made_for.values() if made_for else ():
                made.stale.add(key)

    def samples(
        self, site: str, metric: MetricDef, keys: Sequence[str], label: str = "kind"
    ) -> tuple[Sample, ...]:
        """Every key, from 0, so that rate() sees a site's first error of each kind."""
        with self._lock:
            return self._samples(site, metric, keys, label)

    def samples_of(self, site: str, counters: Sequence[Counter]) -> list[Sample]:
        """`samples` of each counter (its metric, keys and label), under one look of the
        lock: a site's errors and database time, at every scrape."""
        found: list[Sample] = []
        with self._lock:
            for metric, keys, label in counters:
                found += self._samples(site, metric, keys, label)
        return found

    def _samples(
        self, site: str, metric: MetricDef, keys: Sequence[str], label: str
    ) -> tuple[Sample, ...]:
        """`samples`, under the lock."""
        shape = (tuple(keys), label)
        made_for = self._made.get((site, metric))
        if made_for is None:
            made_for = self._made[(site, metric)] = {}
        made = made_for.get(shape)
        if made is None:
            labels = self._labels(metric, shape)
            made = made_for[shape] = _Made(
                keys,
                tuple(map(partial(self._sample, site, metric), keys, labels)),
            )
        elif made.stale:
            samples = list(made.samples)
            for key in made.stale:
                place = made.places.get(key)
                if place is not None:
                    samples[place] = self._sample(site, metric, key, samples[place].labels)
            made.samples = tuple(samples)
            made.stale.clear()
        return made.samples

    def _sample(self, site: str, metric: MetricDef, key: str, labels: Labels) -> Sample:
        """A count's sample (under the lock)."""
        return Sample(metric, value_of(self._counts[(site, metric, key)]), labels)

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
