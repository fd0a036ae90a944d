"""Top-N label folding: keeps cardinality bounded whatever the store holds."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from exporter.metrics.catalog import OTHER


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
