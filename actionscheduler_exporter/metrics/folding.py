"""Top-N label folding: keeps cardinality bounded whatever the store holds.

Two policies, one place: `fold` ranks a gauge's values by their current totals at each
reading (a value may move in and out of "other"); `StickyFold` keeps the first N values of
a counter for the exporter's life, so a counter series never moves (counters stay
monotonic)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from actionscheduler_exporter.metrics.catalog import OTHER


def top_values(totals: Mapping[str, float], limit: int) -> set[str]:
    """The `limit` values with the largest totals; ties broken by name for stable series."""
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return {value for value, _ in ranked[:limit]}


def fold(
    counts: Mapping[str, float], limit: int, keep: Collection[str] = ()
) -> tuple[dict[str, float], int]:
    """Keeps the top `limit` values, and those in `keep` (0 when absent), and sums the rest
    under "other".

    Returns the folded counts and how many distinct values went into "other".
    """
    kept = top_values(counts, limit) | set(keep)
    folded: dict[str, float] = dict.fromkeys(keep, 0.0)
    for value, count in counts.items():
        key = value if value in kept else OTHER
        folded[key] = folded.get(key, 0.0) + count
    return folded, len(counts.keys() - kept)


def fold_oldest(ages: Mapping[str, float], folded: Mapping[str, float]) -> dict[str, float]:
    """Ages for the values of a fold's result: their own, the oldest of those folded into
    "other", 0 for a kept value that has none."""
    oldest: dict[str, float] = dict.fromkeys(folded, 0.0)
    for value, age in ages.items():
        key = value if value in folded and value != OTHER else OTHER
        oldest[key] = max(oldest.get(key, 0.0), age)
    return oldest


class StickyFold:
    """Top-N for counters: the first N values seen keep their name for the exporter's life,
    so a series never moves between its own name and "other" (counters stay monotonic)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._kept:
            return value
        if len(self._kept) < self.limit:
            self._kept.add(value)
            return value
        return OTHER
