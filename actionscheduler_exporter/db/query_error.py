"""Turns driver errors into the exporter's error kinds, with secrets removed."""

from __future__ import annotations

import re

import pymysql.err

from actionscheduler_exporter.errors import SourceError

# Server error codes after which the connection is still usable.
_TIMEOUT_CODES = {1969, 3024}  # MariaDB max_statement_time, MySQL max_execution_time
_MISSING_TABLE_CODES = {1146}  # table does not exist
_STATEMENT_CODES = {1054, 1142, 1143, 1213, 1317}  # column, grants, deadlock, interrupted
# Lock wait timeout exceeded: the table is locked (the session's lock_wait_timeout).
_LOCK_CODES = {1205}
# Client errors (2000-2999: can't connect, gone away, lost during a query, packets out of
# order): the connection is gone. A server error (any other code) is an answer: the
# connection still works, whether or not its code is known here.
_CLIENT_CODES = range(2000, 3000)
# Server errors that end the connection: shutdown, killed connection, network read and
# write failures, MySQL 8's disconnect for inactivity.
_SERVER_CLOSED_CODES = {1053, 1152, 1153, 1154, 1155, 1156, 1157, 1158, 1159, 1160, 1161,
                        1927, 4031}  # fmt: skip
_ONE_CONNECTION_HINT = (
    "the exporter opens a second connection for the heavy tier while a refresh runs: allow "
    "the user 2 connections (MAX_USER_CONNECTIONS), or set heavy_interval: 0 to read "
    "everything on one"
)
# MySQL's and MariaDB's "too many connections of this user".
_HINTS = {1203: _ONE_CONNECTION_HINT, 1226: _ONE_CONNECTION_HINT}
_CLIENT_TIMEOUT_HINT = "timed out"


class QueryError(SourceError):
    """A failed statement or connection, with a kind from catalog.ERROR_KINDS, a message
    safe to log, and whether the connection is gone with it."""

    def __init__(self, kind: str, message: str, *, connection_lost: bool) -> None:
        super().__init__(kind, message)
        self.connection_lost = connection_lost
        # Lost on a pooled connection's first statement since it sat idle: the network
        # dropped it meanwhile, and a new connection may well work.
        self.on_idle_connection = False


def query_error_of(
    error: pymysql.err.MySQLError, password: str, *, connecting: bool = False
) -> QueryError:
    """The driver's error as a QueryError: its kind, its message without the password,
    and whether the connection is gone with it."""
    code = error.args[0] if error.args and isinstance(error.args[0], int) else 0
    message = redact(_describe(error), password)
    if code in _HINTS:
        message = f"{message}: {_HINTS[code]}"
    if connecting or code in _CLIENT_CODES or code in _SERVER_CLOSED_CODES:
        return QueryError("connect", message, connection_lost=True)
    if code in _TIMEOUT_CODES:
        return QueryError("timeout", message, connection_lost=False)
    if code in _LOCK_CODES:
        return QueryError("lock", message, connection_lost=False)
    if code in _MISSING_TABLE_CODES:
        return QueryError("missing_table", message, connection_lost=False)
    if code in _STATEMENT_CODES:
        return QueryError("query", message, connection_lost=False)
    if code:  # a server error this list does not know: the statement failed, not the link
        return QueryError("query", message, connection_lost=False)
    # No code: the driver's own failure (a closed connection, a socket timeout).
    if _CLIENT_TIMEOUT_HINT in message:
        return QueryError("timeout", message, connection_lost=True)
    return QueryError("connect", message, connection_lost=True)


def redact(message: str, secret: str) -> str:
    """Defence in depth: a driver message must never carry the password.

    Where the password stands as a word of its own, the message is withheld but for its
    error code: starring the word would still tell it (a password `denied` in "Access ***
    for user", one equal to the user name in "user '***'@"). A short password that is only
    part of other words ("e", "127") leaves the message as it is."""
    if not secret:
        return message
    pattern = rf"(?<![\w.]){re.escape(secret)}(?![\w.])"
    if not re.search(pattern, message):
        return message
    code = re.match(r"\(\d+\)", message)
    prefix = f"{code.group(0)} " if code else ""
    return f"{prefix}the server's message is withheld: it contains the password"


def _describe(error: pymysql.err.MySQLError) -> str:
    if len(error.args) >= 2:
        return f"({error.args[0]}) {error.args[1]}"
    return str(error) or type(error).__name__
