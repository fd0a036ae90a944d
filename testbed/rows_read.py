"""Rows the storage engine read, from the handler counters: of the server or one session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql

from actionscheduler_exporter.db.session import Session

# Every kind of row read the storage engine does for a statement: index lookups, index and
# table scans. Their sum is what a query examined.
_HANDLER_READS = (
    "Handler_read_first",
    "Handler_read_key",
    "Handler_read_last",
    "Handler_read_next",
    "Handler_read_prev",
    "Handler_read_rnd",
    "Handler_read_rnd_next",
)


def rows_read(connection: pymysql.connections.Connection[Any], scope: str = "GLOBAL") -> int:
    """Handler reads so far: the server's (GLOBAL, all sessions) or this session's."""
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {scope} STATUS WHERE Variable_name IN %s", (_HANDLER_READS,))
        return sum(int(value) for _, value in cursor.fetchall())


def session_rows_read(session: Session) -> int:
    """Handler reads so far of the exporter's own session (its connection alone)."""
    rows = session.query("SHOW SESSION STATUS WHERE Variable_name IN %s", (_HANDLER_READS,))
    return sum(int(value) for _, value in rows)


def session_entries_examined(session: Session) -> int:
    """Handler reads of the exporter's own session plus the index entries its pushed index
    conditions rejected inside the engine (Handler_icp_attempts): a ref on part of an
    index that filters the rest by index condition walks entries no read counter shows."""
    rows = session.query("SHOW SESSION STATUS WHERE Variable_name = 'Handler_icp_attempts'")
    return session_rows_read(session) + sum(int(value) for _, value in rows)


def session_rows_examined(
    connection: pymysql.connections.Connection[Any], call: Callable[[], object]
) -> int:
    """Rows one call on this connection read, less what reading the counters costs."""
    first = rows_read(connection, "SESSION")
    overhead = rows_read(connection, "SESSION") - first
    before = rows_read(connection, "SESSION")
    call()
    return rows_read(connection, "SESSION") - before - overhead
