"""Several stores' statements as one: a `UNION ALL` of their statements in columns, each
branch tagged with its place, sent with a lock wait of one second; and each branch's
values found again by its place. What the read-ahead (`db.read_ahead`) and the cached
readings' refreshes (`db.refresh_together`) send.

The lock wait: a batch waits for a locked table one second at most, then each store is
read alone, with the session's own lock wait. MariaDB sets it for one statement so, MySQL
(8.0.3 and later) with a hint in the first SELECT, which other servers read as a comment.
"""

from __future__ import annotations

from collections.abc import Sequence

from actionscheduler_exporter.db.packed import PackedStatement
from actionscheduler_exporter.db.schema import in_database
from actionscheduler_exporter.db.session import Row

_MARIADB_LOCK_WAIT = "SET STATEMENT lock_wait_timeout = 1 FOR "
_MYSQL_LOCK_WAIT = "SELECT /*+ SET_VAR(lock_wait_timeout = 1) */ "

# A store's statement and the database its tables are in.
Member = tuple[PackedStatement, str]


def union_statement(
    server_version: str, members: Sequence[Member]
) -> tuple[str, tuple[object, ...]]:
    """The members' statements in columns, each branch tagged with its place, and their
    arguments; with the server's one-second lock wait."""
    parts: list[str] = []
    every_arg: list[object] = []
    for place, (statement, database) in enumerate(members):
        branch, branch_args = in_database(*statement.branch(place), database)
        parts.append(branch)
        every_arg.extend(branch_args or ())
    sql = " UNION ALL ".join(parts)
    if "mariadb" in server_version.lower():
        return _MARIADB_LOCK_WAIT + sql, tuple(every_arg)
    return _MYSQL_LOCK_WAIT + sql.removeprefix("SELECT "), tuple(every_arg)


def rows_by_place(rows: list[Row], members: int, width: int) -> dict[int, Row] | None:
    """Each branch's values by its place; None unless every branch answered once, with
    `width` values."""
    found: dict[int, Row] = {}
    for row in rows:
        if len(row) != width + 1 or not isinstance(row[0], int) or row[0] in found:
            return None
        found[row[0]] = tuple(row[1:])
    return found if len(found) == members and all(p in found for p in range(members)) else None
