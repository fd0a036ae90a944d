"""Action Scheduler's table names for a prefix, and what the server knows about them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from exporter.db.session import Session
from exporter.metrics.catalog import TABLES

ACTIONS_SUFFIX = "actionscheduler_actions"
_TABLE_SUFFIX = "actionscheduler_"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class TableNames:
    prefix: str

    def __post_init__(self) -> None:
        # Table names go into SQL text (they cannot be bound parameters): allow only safe ones.
        if not _SAFE_NAME.match(self.prefix + "x"):
            raise ValueError(f"unsafe table prefix {self.prefix!r}")

    def name(self, table: str) -> str:
        return f"{self.prefix}actionscheduler_{table}"

    @property
    def actions(self) -> str:
        return self.name("actions")

    @property
    def claims(self) -> str:
        return self.name("claims")

    @property
    def groups(self) -> str:
        return self.name("groups")

    @property
    def logs(self) -> str:
        return self.name("logs")


@dataclass(frozen=True)
class TableStats:
    rows: int
    size_bytes: int


def read_table_stats(session: Session, tables: TableNames) -> dict[str, TableStats]:
    """Existing tables (by short name) with the server's row estimate and size; no COUNT."""
    full_names = {tables.name(short): short for short in TABLES}
    rows = session.query(
        "SELECT TABLE_NAME, COALESCE(TABLE_ROWS, 0),"
        " COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0)"
        " FROM information_schema.TABLES"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (%s, %s, %s, %s)",
        tuple(full_names),
    )
    return {
        full_names[str(name)]: TableStats(int(count), int(size))
        for name, count, size in rows
        if str(name) in full_names
    }


def discover_prefixes(session: Session) -> dict[str, dict[str, TableStats]]:
    """Every prefix in the database that has an actions table (multisite: wp_, wp_2_, ...),
    with its tables' statistics: one statement for the whole network, where a query per
    subsite would make the server list the database's thousands of tables each time."""
    rows = session.query(
        "SELECT TABLE_NAME, COALESCE(TABLE_ROWS, 0),"
        " COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0)"
        " FROM information_schema.TABLES"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE %s",
        ("%" + _TABLE_SUFFIX.replace("_", "\\_") + "%",),
    )
    found: dict[str, dict[str, TableStats]] = {}
    for name, count, size in rows:
        prefix, _, short = str(name).rpartition(_TABLE_SUFFIX)
        if short in TABLES and _SAFE_NAME.match(prefix + "x"):
            found.setdefault(prefix, {})[short] = TableStats(int(count), int(size))
    return {prefix: found[prefix] for prefix in sorted(found) if "actions" in found[prefix]}
