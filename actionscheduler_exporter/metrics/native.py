"""Native (sparse exponential) histograms: the bucket layout, and the sample that carries
one histogram series whole to the protobuf exposition.

Schema 3: each power of two is cut into 2**3 = 8 buckets, every boundary 2**(1/8) ≈ 1.09
times the one before it: a bucket is 8.3 % of its upper bound wide. Log dates have
one-second resolution, so the observations are whole seconds: up to 14 s every whole
second has a bucket of its own, above that a bucket is narrower than a tenth of its
value, and the powers of two (1, 2, 4 ... 65536 s) are exact boundaries. From 1 s to a
day that is 133 buckets (indexes 0 to 132), only the ones observed being sent.
Zero threshold 0.5: a measured 0 is "under a second", the zero bucket [0, 0.5], like the
classic histograms' 0.5 bucket. The schema is fixed: series keep one layout for life,
and rules sum them across sites without a change of resolution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from actionscheduler_exporter.metrics.samples import Sample

SCHEMA = 3
ZERO_THRESHOLD = 0.5
_PER_OCTAVE: int = 2**SCHEMA


def upper_bound(index: int) -> float:
    """The upper bound of bucket `index`: the bucket holds (bound(index - 1), bound(index)]."""
    return float(2 ** (index / _PER_OCTAVE))


def bucket_index(value: float) -> int:
    """The positive bucket of a value above the zero threshold (bounds are inclusive)."""
    index = math.ceil(math.log2(value) * _PER_OCTAVE)
    # log2 rounds: settle a value that lands a hair off a boundary by the bounds themselves.
    if value > upper_bound(index):
        index += 1
    elif value <= upper_bound(index - 1):
        index -= 1
    return index


@dataclass(frozen=True, slots=True)
class NativeHistogram:
    """One series' state, as the protobuf exposition writes it."""

    count: int
    total: float
    zero_count: int
    # (bucket index, observations), by index; only buckets that hold any.
    positive: tuple[tuple[int, int], ...]
    # The classic buckets too (upper bound, cumulative count; +Inf is the count), while
    # the site's `classic_histograms` says so; None: native only.
    classic: tuple[tuple[float, int], ...] | None = None


@dataclass(slots=True, unsafe_hash=True)
class HistogramCount(Sample):
    """A histogram's `_count` sample, carrying the whole series for the protobuf
    exposition; the text formats write it as the plain sample it is."""

    native: NativeHistogram | None = None
