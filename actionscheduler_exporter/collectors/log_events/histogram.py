"""Cumulative histograms kept across scrapes, one per label set: classic buckets for the
text formats, and the native (sparse exponential) buckets of metrics/native.py for the
protobuf exposition, both from the same observations."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from actionscheduler_exporter.metrics import native
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels, Sample


@dataclass
class _Series:
    buckets: list[int]
    total: float = 0.0
    count: int = 0
    zero: int = 0
    sparse: dict[int, int] = field(default_factory=dict)


@dataclass
class Histogram:
    metric: MetricDef
    bounds: Sequence[float]
    # The protobuf exposition carries the classic buckets beside the native ones.
    classic: bool = True
    # No classic samples at all (a family only the protobuf exposition has).
    native_only: bool = False
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
        if value <= native.ZERO_THRESHOLD:  # the durations observed are never negative
            series.zero += 1
        else:
            sparse = native.bucket_index(value)
            series.sparse[sparse] = series.sparse.get(sparse, 0) + 1

    def merge(self, other: Histogram) -> None:
        for labels, series in other._series.items():
            mine = self._series.setdefault(labels, _Series([0] * len(self.bounds)))
            mine.buckets = [a + b for a, b in zip(mine.buckets, series.buckets, strict=True)]
            mine.total += series.total
            mine.count += series.count
            mine.zero += series.zero
            for index, count in series.sparse.items():
                mine.sparse[index] = mine.sparse.get(index, 0) + count

    def empty_copy(self) -> Histogram:
        return Histogram(self.metric, self.bounds, self.classic, self.native_only)

    def samples(self) -> Iterator[Sample]:
        for labels, series in sorted(self._series.items()):
            classic: list[tuple[float, int]] = []
            cumulative = 0
            for bound, in_bucket in zip(self.bounds, series.buckets, strict=True):
                cumulative += in_bucket
                classic.append((float(bound), cumulative))
            if not self.native_only:
                for bound, up_to in classic:
                    yield Sample(self.metric, up_to, (*labels, ("le", _le(bound))), "_bucket")
                yield Sample(self.metric, series.count, (*labels, ("le", "+Inf")), "_bucket")
                yield Sample(self.metric, series.total, labels, "_sum")
            state = native.NativeHistogram(
                series.count,
                series.total,
                series.zero,
                tuple(sorted(series.sparse.items())),
                tuple(classic) if self.classic and not self.native_only else None,
            )
            yield native.HistogramCount(self.metric, series.count, labels, "_count", state)


def _le(bound: float) -> str:
    return repr(float(bound))
