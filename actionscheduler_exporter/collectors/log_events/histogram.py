"""Cumulative histograms kept across scrapes, one per label set."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels, Sample


@dataclass
class _Series:
    buckets: list[int]
    total: float = 0.0
    count: int = 0


@dataclass
class Histogram:
    metric: MetricDef
    bounds: Sequence[float]
    _series: dict[Labels, _Series] = field(default_factory=dict)

    def observe(self, labels: Labels, value: float) -> None:
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = _Series([0] * len(self.bounds))
        index = bisect.bisect_left(self.bounds, value)
        if index < len(self.bounds):
            series.buckets[index] += 1
        series.total += value
        series.count += 1

    def merge(self, other: Histogram) -> None:
        for labels, series in other._series.items():
            mine = self._series.setdefault(labels, _Series([0] * len(self.bounds)))
            mine.buckets = [a + b for a, b in zip(mine.buckets, series.buckets, strict=True)]
            mine.total += series.total
            mine.count += series.count

    def empty_copy(self) -> Histogram:
        return Histogram(self.metric, self.bounds)

    def samples(self) -> Iterator[Sample]:
        for labels, series in sorted(self._series.items()):
            cumulative = 0
            for bound, in_bucket in zip(self.bounds, series.buckets, strict=True):
                cumulative += in_bucket
                yield Sample(self.metric, cumulative, (*labels, ("le", _le(bound))), "_bucket")
            yield Sample(self.metric, series.count, (*labels, ("le", "+Inf")), "_bucket")
            yield Sample(self.metric, series.total, labels, "_sum")
            yield Sample(self.metric, series.count, labels, "_count")


def _le(bound: float) -> str:
    return repr(float(bound))
