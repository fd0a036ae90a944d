"""Group slugs by id: the one lookup of the groups table that collectors share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from exporter.collectors.context import DatabaseContext, label_value

# Ids per IN (...) list, to keep statements a reasonable size.
LOOKUP_CHUNK = 1000


def group_slugs(context: DatabaseContext, group_ids: Iterable[int]) -> dict[int, str]:
    """Slug per group id; ids 0 and ids without a row (deleted groups) are left out."""
    slugs: dict[int, str] = {}
    for chunk in chunks(sorted({group_id for group_id in group_ids if group_id})):
        for group_id, slug in context.query(
            f"SELECT group_id, slug FROM {context.tables.groups}"
            f" WHERE group_id IN ({placeholders(chunk)})",
            chunk,
        ):
            slugs[int(group_id)] = label_value(slug)
    return slugs


def chunks(values: list[int]) -> Iterator[list[int]]:
    for index in range(0, len(values), LOOKUP_CHUNK):
        yield values[index : index + LOOKUP_CHUNK]


def placeholders(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))
