"""Top-N label folding: keeps cardinality bounded whatever the store holds."""

from __future__ import annotations

from collections.abc import Mapping

from exporter.metrics.catalog import OTHER


def top_values(totals: Mapping[str, float], limit: int) -> set[str]:
    """The `limit` values with the largest totals; ties broken by name for stable series."""
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return {value for value, _ in ranked[:limit]}


def fold(counts: Mapping[str, float], limit: int) -> tuple[dict[str, float], int]:
    """Keeps the top `limit` values and sums the rest under "other".

    Returns the folded counts and how many distinct values went into "other".
    """
    kept = top_values(counts, limit)
    folded: dict[str, float] = {}
    for value, count in counts.items():
        key = value if value in kept else OTHER
        folded[key] = folded.get(key, 0.0) + count
    return folded, len(counts) - len(kept)
