"""Action Scheduler's table names for a prefix, and what the server knows about them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from exporter.db.session import Session
from exporter.metrics.catalog import TABLES

ACTIONS_SUFFIX = "actionscheduler_actions"
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


def discover_prefixes(session: Session) -> list[str]:
    """Every prefix in the database that has an actions table (multisite: wp_, wp_2_, ...)."""
    rows = session.query(
        "SELECT TABLE_NAME FROM information_schema.TABLES"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE %s",
        ("%" + ACTIONS_SUFFIX.replace("_", "\\_"),),
    )
    prefixes = {str(name)[: -len(ACTIONS_SUFFIX)] for (name,) in rows}
    return sorted(prefix for prefix in prefixes if _SAFE_NAME.match(prefix + "x"))
