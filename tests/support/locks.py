"""Table locks as a backup or an ALTER takes them, and the statements waiting for them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pymysql


def lock_tables(connection: pymysql.connections.Connection[Any], tables: list[str]) -> None:
    """`LOCK TABLES ... WRITE` on the connection, until it unlocks or goes away."""
    with connection.cursor() as cursor:
        cursor.execute("LOCK TABLES " + ", ".join(f"{table} WRITE" for table in tables))


@contextlib.contextmanager
def tables_locked(
    connection: pymysql.connections.Connection[Any], tables: list[str]
) -> Iterator[None]:
    """The tables held with `LOCK TABLES ... WRITE` for the block."""
    lock_tables(connection, tables)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("UNLOCK TABLES")


def lock_waits(connection: pymysql.connections.Connection[Any], database: str) -> int:
    """Statements waiting for a table lock in the test's own database (the exporter's:
    another test run's waits are in databases of its own)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
            " WHERE STATE LIKE 'Waiting for table%%' AND DB = %s",
            (database,),
        )
        return int(cursor.fetchone()[0])
