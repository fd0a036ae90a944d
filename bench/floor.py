"""The floor: the least SQL any exporter of these queues must send, timed in the same run
as the exporter and on the same connection budget, so that the exporter is judged as a
ratio to it (machines here differ by two times from one day to the next; ratios much less).

One store: on one connection, one statement of the hot scalar subqueries (the due count,
the oldest due, undated pending, active claims, the running count and the oldest start,
the last minute's outcomes from the log, the newest log id), then the log tail above the
newest id (a quiet store: no row), as a cursor reads it.

N stores: one statement per store of the hot scalar subqueries (due count, oldest due, due
claimed, running count and oldest, active claims, claim rows, newest log id), sent over
`connections` connections side by side (the exporter's `connections_per_server`).
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pymysql

Connect = Callable[[], "pymysql.connections.Connection[Any]"]


def one_store_statements(prefix: str) -> list[tuple[str, tuple[object, ...]]]:
    """The one-store floor, as (sql, args): each subquery bounded by an index range."""
    actions, claims, logs = (
        f"{prefix}actionscheduler_{table}" for table in ("actions", "claims", "logs")
    )
    pending = f"FROM {actions} WHERE status = 'pending'"
    scalars = (
        f"SELECT COUNT(*) {pending} AND scheduled_date_gmt <= UTC_TIMESTAMP()",
        f"SELECT MIN(scheduled_date_gmt) {pending} AND scheduled_date_gmt"
        " BETWEEN '0001-01-01' AND UTC_TIMESTAMP()",
        f"SELECT COUNT(*) {pending} AND (scheduled_date_gmt IS NULL"
        " OR scheduled_date_gmt < '0001-01-01')",
        f"SELECT COUNT(DISTINCT claim_id) FROM {actions}"
        " WHERE claim_id != 0 AND status IN ('pending', 'in-progress')",
        f"SELECT COUNT(*) FROM {actions} WHERE status = 'in-progress'",
        f"SELECT MIN(last_attempt_gmt) FROM {actions} WHERE status = 'in-progress'",
        f"SELECT COUNT(*) FROM {claims}",
        f"SELECT COUNT(*) FROM {logs} WHERE log_date_gmt >= UTC_TIMESTAMP() - INTERVAL 60 SECOND",
        f"SELECT COALESCE(MAX(log_id), 0) FROM {logs}",
    )
    tail = (
        f"SELECT log_id, action_id, LEFT(message, 512), log_date_gmt FROM {logs}"
        f" WHERE log_id > (SELECT COALESCE(MAX(log_id), 0) FROM {logs})"
        " ORDER BY log_id LIMIT 1000"
    )
    return [("SELECT " + ", ".join(f"({sql})" for sql in scalars), ()), (tail, ())]


def many_stores_statement(database: str, prefix: str, *, together: bool = False) -> str:
    """One store's statement of the N-store floor; `together`: the values that one pass
    over the same rows gives (the due count and oldest, the running count and oldest, the
    claimed due actions and the active claims) in one subquery each, as the exporter
    reads them: 5 subqueries instead of 8."""
    actions, claims, logs = (
        f"`{database}`.{prefix}actionscheduler_{table}" for table in ("actions", "claims", "logs")
    )
    pending = f"FROM {actions} WHERE status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP()"
    if together:
        scalars: tuple[str, ...] = (
            f"SELECT CONCAT_WS('/', COUNT(*), MIN(scheduled_date_gmt)) {pending}",
            f"SELECT CONCAT_WS('/', COUNT(*), MIN(last_attempt_gmt)) FROM {actions}"
            " WHERE status = 'in-progress'",
            "SELECT CONCAT_WS('/', COUNT(CASE WHEN status = 'pending'"
            " AND scheduled_date_gmt <= UTC_TIMESTAMP() THEN 1 END), COUNT(DISTINCT claim_id))"
            f" FROM {actions} WHERE claim_id != 0 AND status IN ('pending', 'in-progress')",
            f"SELECT COUNT(*) FROM {claims}",
            f"SELECT COALESCE(MAX(log_id), 0) FROM {logs}",
        )
        return "SELECT " + ", ".join(f"({sql})" for sql in scalars)
    scalars = (
        f"SELECT COUNT(*) {pending}",
        f"SELECT MIN(scheduled_date_gmt) {pending}",
        f"SELECT COUNT(*) FROM {actions} WHERE claim_id > 0 AND status = 'pending'"
        " AND scheduled_date_gmt <= UTC_TIMESTAMP()",
        f"SELECT COUNT(*) FROM {actions} WHERE status = 'in-progress'",
        f"SELECT MIN(last_attempt_gmt) FROM {actions} WHERE status = 'in-progress'",
        f"SELECT COUNT(DISTINCT claim_id) FROM {actions}"
        " WHERE claim_id != 0 AND status IN ('pending', 'in-progress')",
        f"SELECT COUNT(*) FROM {claims}",
        f"SELECT COALESCE(MAX(log_id), 0) FROM {logs}",
    )
    return "SELECT " + ", ".join(f"({sql})" for sql in scalars)


def replay_one(
    connection: pymysql.connections.Connection[Any],
    statements: Sequence[tuple[str, tuple[object, ...]]],
) -> None:
    with connection.cursor() as cursor:
        for sql, args in statements:
            cursor.execute(sql, args or None)
            cursor.fetchall()


class ManyStoresFloor:
    """`connections` open connections; `run` sends every store's statement over them side
    by side, as the exporter's lanes do, and returns when all have answered."""

    def __init__(self, connect: Connect, statements: Sequence[str], connections: int) -> None:
        self._statements = list(statements)
        self._connections = [connect() for _ in range(connections)]

    def run(self) -> None:
        work: queue.SimpleQueue[str] = queue.SimpleQueue()
        for statement in self._statements:
            work.put(statement)

        def drain(connection: pymysql.connections.Connection[Any]) -> None:
            with connection.cursor() as cursor:
                while True:
                    try:
                        sql = work.get_nowait()
                    except queue.Empty:
                        return
                    cursor.execute(sql)
                    cursor.fetchall()

        side_by_side([functools.partial(drain, c) for c in self._connections])

    def close(self) -> None:
        for connection in self._connections:
            with contextlib.suppress(pymysql.Error):
                connection.close()


def side_by_side(calls: Sequence[Callable[[], object]]) -> None:
    """Each call in a thread of its own, all at once; the first error is raised here, not
    lost in its thread."""
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@contextlib.contextmanager
def many_stores_floor(
    connect: Connect, statements: Sequence[str], connections: int
) -> Iterator[ManyStoresFloor]:
    floor = ManyStoresFloor(connect, statements, connections)
    try:
        yield floor
    finally:
        floor.close()
