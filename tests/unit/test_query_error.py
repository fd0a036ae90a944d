"""Which driver errors mean the connection is gone (the site is down) and which are a
failed statement on a working connection (the collector fails, the site stays up)."""

from __future__ import annotations

import pytest
from pymysql.err import InterfaceError, MySQLError, OperationalError, ProgrammingError

from actionscheduler_exporter.db.query_error import query_error_of


@pytest.mark.parametrize(
    ("error", "kind", "lost"),
    [
        # Client errors: the connection is gone.
        (OperationalError(2013, "Lost connection during query"), "connect", True),
        (OperationalError(2006, "MySQL server has gone away"), "connect", True),
        (OperationalError(2003, "Can't connect"), "connect", True),
        (InterfaceError(0, ""), "connect", True),
        # Server errors that end the connection.
        (OperationalError(1927, "Connection was killed"), "connect", True),
        (OperationalError(4031, "disconnected for inactivity"), "connect", True),
        (OperationalError(1053, "Server shutdown in progress"), "connect", True),
        # Server errors on a working connection, known or not.
        (OperationalError(1242, "Subquery returns more than 1 row"), "query", False),
        (OperationalError(1317, "Query execution was interrupted"), "query", False),
        (ProgrammingError(1064, "You have an error in your SQL"), "query", False),
        (OperationalError(1999, "a code this list has never heard of"), "query", False),
        (OperationalError(3948, "a MySQL 8 server error"), "query", False),
        (OperationalError(1969, "max_statement_time exceeded"), "timeout", False),
        (OperationalError(1205, "Lock wait timeout exceeded"), "lock", False),
        (ProgrammingError(1146, "Table doesn't exist"), "missing_table", False),
    ],
)  # fmt: skip
def test_only_a_gone_connection_is_a_lost_one(error: MySQLError, kind: str, lost: bool) -> None:
    failure = query_error_of(error, "secret")
    assert (failure.kind, failure.connection_lost) == (kind, lost)


def test_any_error_while_connecting_is_a_connection_failure() -> None:
    error = OperationalError(1045, "Access denied for user 'asexp'")
    failure = query_error_of(error, "secret", connecting=True)
    assert (failure.kind, failure.connection_lost) == ("connect", True)
