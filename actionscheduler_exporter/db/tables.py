"""What the server knows about Action Scheduler's tables, and the group lookup every reader
of the tables shares."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import (
    SITE_DATABASE,
    TABLE_INFIX,
    TABLES,
    TableNames,
    chunks,
    is_safe_prefix,
    label_value,
    placeholders,
)
from actionscheduler_exporter.db.session import Session


@dataclass(frozen=True)
class TableStats:
    rows: int
    size_bytes: int


# A table's statistics, looked up by its name: with `TABLE_NAME = ...` the server opens
# that table alone, where `TABLE_NAME IN (...)` made it list every table of the database
# (a network of a thousand subsites: four thousand, 6.3 against 0.65 ms per prefix,
# docs/performance.md).
_ROWS_AND_SIZE = "COALESCE(TABLE_ROWS, 0), COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0)"
_OF_TABLE = " FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
_STATS_OF_TABLE = f"SELECT TABLE_NAME, {_ROWS_AND_SIZE}{_OF_TABLE}"
_PACKED_STATS_OF_TABLE = f"SELECT CONCAT_WS(' ', TABLE_NAME, {_ROWS_AND_SIZE}){_OF_TABLE}"


def _lookup_args(tables: TableNames) -> tuple[object, ...]:
    return tuple(arg for short in TABLES for arg in (SITE_DATABASE, tables.name(short)))


def read_table_stats(session: Session, tables: TableNames) -> dict[str, TableStats]:
    """Existing tables (by short name) with the server's row estimate and size; no COUNT.
    As rows: the read apart from a packed answer that could not be one."""
    full_names = {tables.name(short): short for short in TABLES}
    rows = session.query(*table_stats_rows(tables))
    try:
        return {
            full_names[str(name)]: TableStats(int(count), int(size))
            for name, count, size in rows
            if str(name) in full_names
        }
    except (TypeError, ValueError) as error:
        raise _malformed(f"table statistics: {type(error).__name__}") from error


def table_stats_rows(tables: TableNames) -> tuple[str, tuple[object, ...]]:
    """The statement of `read_table_stats`: a row per existing table."""
    return " UNION ALL ".join([_STATS_OF_TABLE] * len(TABLES)), _lookup_args(tables)


def table_stats_column(tables: TableNames) -> tuple[str, tuple[object, ...]]:
    """`read_table_stats` as one scalar subquery, for a combined statement: the existing
    tables' "name rows size", joined by commas (names are [A-Za-z0-9_] only; a missing
    table's lookup is NULL, which CONCAT_WS leaves out)."""
    lookups = ", ".join(f"({_PACKED_STATS_OF_TABLE})" for _ in TABLES)
    return f"SELECT CONCAT_WS(',', {lookups})", _lookup_args(tables)


def parse_table_stats(tables: TableNames, packed: object) -> dict[str, TableStats]:
    """The value of `table_stats_column`, as `read_table_stats` returns it."""
    text = packed.decode() if isinstance(packed, bytes | bytearray) else str(packed or "")
    full_names = {tables.name(short): short for short in TABLES}
    found: dict[str, TableStats] = {}
    for entry in filter(None, text.split(",")):
        # A text cut short ends in a part entry.
        parts = entry.split(" ")
        if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
            raise _malformed(f"table statistics cut or garbled: {entry[:80]!r}")
        name, rows, size = parts
        if name in full_names:
            found[full_names[name]] = TableStats(int(rows), int(size))
    return found


def database_visible(session: Session) -> bool:
    """Whether the site's database exists and its user may see it; True when that cannot
    be read (the missing tables are then reported as such)."""
    try:
        rows = session.query(
            "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
            (SITE_DATABASE,),
        )
    except QueryError as error:
        if error.connection_lost:
            raise
        return True
    return not rows or bool(rows[0][0])


def _malformed(problem: str) -> QueryError:
    return QueryError("malformed", problem, connection_lost=False)


def discover_prefixes(session: Session) -> dict[str, dict[str, TableStats]]:
    """Every prefix in the database that has an actions table (multisite: wp_, wp_2_, ...),
    with its tables' statistics: one statement for the whole network, where a query per
    subsite would make the server list the database's thousands of tables each time."""
    rows = session.query(
        "SELECT TABLE_NAME, COALESCE(TABLE_ROWS, 0),"
        " COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0)"
        " FROM information_schema.TABLES"
        " WHERE TABLE_SCHEMA = %s AND TABLE_NAME LIKE %s",
        (SITE_DATABASE, "%" + TABLE_INFIX.replace("_", "\\_") + "%"),
    )
    found: dict[str, dict[str, TableStats]] = {}
    for name, count, size in rows:
        prefix, _, short = str(name).rpartition(TABLE_INFIX)
        if short in TABLES and is_safe_prefix(prefix):
            found.setdefault(prefix, {})[short] = TableStats(int(count), int(size))
    return {prefix: found[prefix] for prefix in sorted(found) if "actions" in found[prefix]}


def list_prefixes(session: Session) -> list[str]:
    """Every prefix in the database that has an actions table, by name alone: the server
    lists names without opening a table, where its statistics open each of them (a
    network of a thousand subsites: four thousand tables, a third of the floor of its
    scrape; docs/performance.md)."""
    rows = session.query(
        "SELECT TABLE_NAME FROM information_schema.TABLES"
        " WHERE TABLE_SCHEMA = %s AND TABLE_NAME LIKE %s",
        (SITE_DATABASE, "%" + (TABLE_INFIX + "actions").replace("_", "\\_")),
    )
    suffix = TABLE_INFIX + "actions"
    found = {str(name)[: -len(suffix)] for (name,) in rows if str(name).endswith(suffix)}
    return sorted(prefix for prefix in found if is_safe_prefix(prefix))


def group_slugs(session: Session, tables: TableNames, group_ids: Iterable[int]) -> dict[int, str]:
    """Slug per group id; ids 0 and ids without a row (deleted groups) are left out."""
    slugs: dict[int, str] = {}
    for chunk in chunks(sorted({group_id for group_id in group_ids if group_id})):
        for group_id, slug in session.query(
            f"SELECT group_id, slug FROM {tables.groups} WHERE group_id IN ({placeholders(chunk)})",
            chunk,
        ):
            slugs[int(group_id)] = label_value(slug)
    return slugs
