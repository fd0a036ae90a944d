"""A `LeanConnection`'s answers on a real MariaDB are PyMySQL's: the same rows and the same
descriptions as a plain PyMySQL connection's, for the types the exporter reads and the
lengths of every width, with its buffered, unbuffered and mapping cursors; a statement's
descriptions are parsed once and taken again at its next answers, by any connection
(one over real tables, which names its database, is not kept); a connection given other
converters than PyMySQL's own is answered with its own, and its descriptions are not
kept for the others."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest
from pymysql.constants import FIELD_TYPE

from actionscheduler_exporter.db import lean_rows
from actionscheduler_exporter.db.lean_rows import LeanConnection
from testbed.mariadb import Server

# Every type a hot or heavy statement answers with, NULLs, texts of every length prefix
# (one, two and three bytes), and a row of another shape after.
_STATEMENT = """
SELECT 7 AS a, -3 AS b, 18446744073709551615 AS c, CAST(2.5 AS DECIMAL(10, 3)) AS d,
       CAST(1.25 AS DOUBLE) AS e, 1e-7 AS f, NULL AS g,
       CAST('2026-12-06 05:00:01' AS DATETIME) AS h, CAST('2026-12-06' AS DATE) AS i,
       _utf8mb4'Bestellung über 5 € — ok' AS j, REPEAT('x', 300) AS k,
       REPEAT('y', 70000) AS l, CAST('bin\\0ary' AS BINARY) AS m, CAST(NULL AS DATETIME) AS n
UNION ALL
SELECT 0, 0, 0, NULL, NULL, NULL, 1, NULL, NULL, '', '', '', '', NULL
"""


def _open(server: Server, connection_class: type[Any], **options: Any) -> Any:
    return connection_class(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        autocommit=True,
        charset="utf8mb4",
        **options,
    )


def _answer(connection: Any, sql: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return tuple(cursor.fetchall()), tuple(cursor.description)


def _description(connection: Any, sql: str) -> Any:
    """The description object of the statement's answer, as the result made it."""
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.description


@pytest.fixture
def descriptions_kept() -> dict[tuple[object, ...], Any]:
    """The module's kept descriptions, empty at the test's start."""
    kept = lean_rows._descriptions
    kept.clear()
    return kept


def test_answers_are_pymysqls(mariadb: Server, descriptions_kept: dict[Any, Any]) -> None:
    plain = _open(mariadb, pymysql.connections.Connection)
    lean = _open(mariadb, LeanConnection)
    try:
        expected = _answer(plain, _STATEMENT)
        assert _answer(lean, _STATEMENT) == expected
        assert len(descriptions_kept) == 1
        # Taken again, by this connection and by another.
        assert _answer(lean, _STATEMENT) == expected
        other = _open(mariadb, LeanConnection)
        try:
            assert _answer(other, _STATEMENT) == expected
            # Taken, not parsed again: the same object at every answer.
            assert _description(other, _STATEMENT) is _description(lean, _STATEMENT)
        finally:
            other.close()
        assert len(descriptions_kept) == 1
        rows, _ = expected
        assert rows[0][11] == "y" * 70000 and rows[0][12] == b"bin\0ary" and rows[0][6] is None
    finally:
        plain.close()
        lean.close()


def test_a_statement_over_a_table_is_answered_but_its_descriptions_not_kept(
    mariadb: Server, database: str, descriptions_kept: dict[Any, Any]
) -> None:
    """Its descriptions name its database: a thousand stores' would be a thousand sets."""
    plain = _open(mariadb, pymysql.connections.Connection, database=database)
    lean = _open(mariadb, LeanConnection, database=database)
    try:
        with plain.cursor() as cursor:
            cursor.execute("CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, note TEXT)")
            cursor.execute("INSERT INTO t VALUES (1, 'a'), (2, NULL)")
        sql = "SELECT id, note, id + 1 AS next FROM t ORDER BY id"
        assert _answer(lean, sql) == _answer(plain, sql)
        assert descriptions_kept == {}
        assert _answer(lean, "SELECT 1 AS computed")[0] == ((1,),)
        assert len(descriptions_kept) == 1
    finally:
        plain.close()
        lean.close()


def test_statements_without_rows_and_errors_are_as_pymysqls(mariadb: Server) -> None:
    plain = _open(mariadb, pymysql.connections.Connection)
    lean = _open(mariadb, LeanConnection)
    try:
        empty = "SELECT 1 AS a FROM DUAL WHERE 0"
        assert _answer(lean, empty) == _answer(plain, empty)
        assert _answer(lean, empty)[0] == ()
        for connection in (plain, lean):
            with pytest.raises(pymysql.err.ProgrammingError, match="no_such_database"):
                _answer(connection, "SELECT * FROM no_such_database.no_such_table")
        assert _answer(lean, "SELECT 2 AS b")[0] == ((2,),)  # the connection goes on
    finally:
        plain.close()
        lean.close()


def test_a_connection_with_its_own_converters_is_answered_with_them(
    mariadb: Server, descriptions_kept: dict[Any, Any]
) -> None:
    conversions = dict(pymysql.converters.conversions)
    for code in (FIELD_TYPE.LONG, FIELD_TYPE.LONGLONG):
        conversions[code] = lambda text: f"whole {text}"
    own = _open(mariadb, LeanConnection, conv=conversions)
    default = _open(mariadb, LeanConnection)
    try:
        assert _answer(own, "SELECT 7 AS a")[0] == (("whole 7",),)
        assert descriptions_kept == {}
        assert _answer(default, "SELECT 7 AS a")[0] == ((7,),)
        assert _answer(own, "SELECT 7 AS a")[0] == (("whole 7",),)
    finally:
        own.close()
        default.close()


def test_the_kept_descriptions_start_over_at_their_bound(
    mariadb: Server, descriptions_kept: dict[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lean_rows, "MAX_DESCRIPTIONS", 3)
    lean = _open(mariadb, LeanConnection)
    try:
        for number in range(7):
            assert _answer(lean, f"SELECT {number} AS column_{number}")[0] == ((number,),)
            assert 1 <= len(descriptions_kept) <= 3
    finally:
        lean.close()


@pytest.mark.parametrize(
    "cursor_class",
    [pymysql.cursors.SSCursor, pymysql.cursors.DictCursor],
    ids=["unbuffered", "dict"],
)
def test_other_cursors_are_answered_as_pymysqls(mariadb: Server, cursor_class: type[Any]) -> None:
    """An unbuffered answer is parsed row by row as it arrives; a mapping cursor names
    the values by the descriptions: both as a plain PyMySQL connection has them."""
    plain = _open(mariadb, pymysql.connections.Connection)
    lean = _open(mariadb, LeanConnection)
    try:
        answers = []
        for connection in (plain, lean):
            with connection.cursor(cursor_class) as cursor:
                cursor.execute(_STATEMENT)
                answers.append((list(cursor.fetchall()), cursor.description))
        assert answers[0] == answers[1]
        assert len(answers[1][0]) == 2
    finally:
        plain.close()
        lean.close()
