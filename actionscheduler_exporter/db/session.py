"""One read-only, time-limited database session per configured site.

The connection is opened lazily (or borrowed from the server's pool when the round first
needs one: a store whose hot statement another round's batch answered may need none),
reused across scrapes, and dropped after any error that may have left it in an unknown
state, so the next scrape opens a fresh one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pymysql
import pymysql.err

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.grants import can_write
from actionscheduler_exporter.db.lean_rows import LeanConnection
from actionscheduler_exporter.db.pool import Pooled, ServerPool, login_of
from actionscheduler_exporter.db.query_error import QueryError, query_error_of
from actionscheduler_exporter.db.schema import in_database
from actionscheduler_exporter.logs import emit

log = logging.getLogger(__name__)

# Server and user pairs already warned about: once per pair for the process, whatever
# the sessions (a network's subsites borrow new ones every round).
_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def _first_time(key: tuple[str, str]) -> bool:
    with _WARNED_LOCK:
        if key in _WARNED:
            return False
        _WARNED.add(key)
        return True


Row = tuple[Any, ...]
_T = TypeVar("_T")
# Takes the seconds one statement took.
Meter = Callable[[float], None]


class Session:
    def __init__(
        self,
        site: SiteConfig,
        *,
        check_grants: bool = True,
        pool: ServerPool | None = None,
        background: bool = False,
    ) -> None:
        """`check_grants`: read the user's grants and warn when it may write (the scrape's
        session does; a second session of the same user need not). `pool`: borrow the
        connection from the server's pool for each round (`release` hands it back)
        instead of keeping one of its own. `background`: a refresh's, which lets the
        rounds borrow first."""
        self._site = site
        # The server (host, port, socket) and the database the statements go to.
        self.endpoint = (site.host, site.port, site.unix_socket or "", site.database)
        self._check_grants = check_grants
        self._pool = pool
        self._background = background
        self._pooled: Pooled | None = None
        self._lock = threading.Lock()
        self.server_version = ""
        self.can_write = False
        # Where the time of each statement is counted (the round sets it per tier).
        self._meter: Meter | None = None
        # A statement succeeded on the connection since it was borrowed or opened.
        self._proven = False
        # Whether a connection was ever borrowed or opened (`can_write` is then known).
        self.has_connected = False
        # The last connection was lost, or the last attempt to connect failed: true
        # until the session connects again (a released connection is not lost).
        self.lost = False
        # Why the last attempt to connect failed, until one succeeds.
        self.connect_error: QueryError | None = None
        # Statements tried, each with its wait for a connection: where a round's time
        # goes (the collectors' loop looks at the deadline only when this moved).
        self.statements_tried = 0

    @property
    def connected(self) -> bool:
        return self._pooled is not None

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        rows, _ = self._execute(sql, args)
        return rows

    def query_named(self, sql: str) -> list[dict[str, Any]]:
        """Rows as mappings of column name to value (for SHOW statements)."""
        rows, description = self._execute(sql, None)
        names = [column[0] for column in description]
        return [dict(zip(names, row, strict=True)) for row in rows]

    def query_typed(
        self, sql: str, args: Sequence[object] | None = None
    ) -> tuple[list[Row], tuple[int, ...]]:
        """Rows, and the type code of each column (`pymysql.constants.FIELD_TYPE`)."""
        rows, description = self._execute(sql, args)
        return rows, tuple(column[1] for column in description)

    def _execute(
        self, sql: str, args: Sequence[object] | None
    ) -> tuple[list[Row], tuple[tuple[Any, ...], ...]]:
        sql, args = in_database(sql, args, self._site.database)
        with self._lock:
            return self._once_more_if_dropped(lambda: self._attempt(sql, args))

    def _once_more_if_dropped(self, call: Callable[[], _T]) -> _T:
        """`call`, and once more on a new connection if it found a pooled connection that
        the network dropped while it was idle (a failover, a load balancer's idle
        timeout): the others that idled beside it are suspect too, so they are closed,
        before anything is reported. The statements are SELECTs and session settings:
        sending one again is harmless."""
        try:
            return call()
        except QueryError as failure:
            if not (failure.connection_lost and failure.on_idle_connection):
                raise
        emit(log, logging.DEBUG, "pooled connection gone, reconnecting", site=self._site.name)
        if self._pool is not None:
            self._pool.close_idle()
        return call()

    def _attempt(
        self, sql: str, args: Sequence[object] | None
    ) -> tuple[list[Row], tuple[tuple[Any, ...], ...]]:
        self.statements_tried += 1
        connection = self._connect()
        untried = self._pooled is not None and self._pooled.reused and not self._proven
        started = time.perf_counter()
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, args)
                rows = list(cursor.fetchall())
                description = tuple(cursor.description or ())
            self._proven = True
            return rows, description
        except pymysql.err.MySQLError as error:
            failure = query_error_of(error, self._site.password)
            if failure.connection_lost:
                self._drop()
                failure.on_idle_connection = untried
            raise failure from error
        finally:
            if self._meter is not None:
                self._meter(time.perf_counter() - started)

    @property
    def timeout(self) -> float:
        """Seconds the client waits for a statement's answer at most."""
        return self._site.query_timeout + CLIENT_GRACE_SECONDS

    def bill(self, seconds: float) -> None:
        """Counts `seconds` of database time where the session's statements count now
        (a share of a statement sent for several sites: `db.read_ahead`)."""
        if self._meter is not None:
            self._meter(seconds)

    def billing(self, meter: Meter | None) -> Meter | None:
        """Counts the time of every statement sent from now on with `meter` (None: not
        counted); returns the meter counted with until now, to be given back."""
        previous, self._meter = self._meter, meter
        return previous

    def billed_to(self, meter: Meter) -> _Billing:
        """Counts the time of every statement sent inside the block with `meter` (the
        database time of one site and tier), where the statement runs."""
        return _Billing(self, meter)

    def open(self) -> None:
        """Connects (or borrows a connection) now; QueryError when it cannot."""
        with self._lock:
            self._once_more_if_dropped(self._connect)

    def ready(self) -> None:
        """Connects now unless connected: before a statement is timed, whose time must not
        hold the wait for a connection (a round that took its answer read ahead holds
        none). QueryError when it cannot."""
        if self._pooled is None:
            self.open()

    def try_open(self) -> bool:
        """Connects now unless connected, for work that may be left undone (reading other
        stores ahead): a failure leaves the session as it was."""
        if self._pooled is not None:
            return True
        lost, failed = self.lost, self.connect_error
        try:
            self.open()
        except QueryError:
            self.lost, self.connect_error = lost, failed
            return False
        return True

    def release(self) -> None:
        """Ends the session's use of its connection: back to the pool, still open (a
        session without a pool keeps it for the next round)."""
        if self._pooled is None:  # most rounds borrow none (`db.read_ahead`)
            return
        with self._lock:
            if self._pool is not None and self._pooled is not None:
                self._pool.release(self._pooled)
                self._pooled = None

    def close(self) -> None:
        with self._lock:
            if self._pool is not None and self._pooled is not None:
                self._pool.release(self._pooled)
                self._pooled = None
            else:
                self._drop()

    def _connect(self) -> pymysql.connections.Connection[Any]:
        if self._pooled is not None:
            return self._pooled.connection
        self.lost = True  # until the connection is ready
        try:
            return self._new_connection()
        except QueryError as error:
            self.connect_error = error
            raise

    def _new_connection(self) -> pymysql.connections.Connection[Any]:
        site = self._site
        try:
            if self._pool is None:
                pooled = self._open()
            else:
                pooled = self._pool.acquire(
                    site, site.query_timeout, self._open, background=self._background
                )
        except pymysql.err.MySQLError as error:
            raise query_error_of(error, site.password, connecting=True) from error
        except OSError as error:  # TLS files unreadable, and similar local failures
            raise QueryError("connect", str(error), connection_lost=True) from error
        self._pooled = pooled
        self._proven = False
        try:
            if pooled.bound != site.query_timeout:  # last used by the other tier
                _bound(pooled, site.query_timeout)
                self._proven = True
            if self._check_grants and pooled.grants is None:
                pooled.grants = _grants(pooled.connection)
                self._proven = True
        except pymysql.err.MySQLError as error:
            # Not handed back: the connection's bound or grants are not known.
            self._drop()
            failure = query_error_of(error, site.password, connecting=True)
            failure.on_idle_connection = pooled.reused
            raise failure from error
        except BaseException:
            self._drop()
            raise
        self.server_version = pooled.server_version
        self.can_write = bool(pooled.grants) and can_write(pooled.grants or [], site.database)
        self.has_connected = True
        self.lost, self.connect_error = False, None
        if self.can_write and _first_time((site.endpoint, site.user)):
            emit(log, logging.WARNING, "the database user may write", site=site.name,
                 user=site.user, hint="grant it SELECT on the four Action Scheduler tables "
                 "only (README, 'The database user')")  # fmt: skip
        return pooled.connection

    def _open(self) -> Pooled:
        site = self._site
        timeout = site.query_timeout
        connection = LeanConnection(
            host=site.host,
            port=site.port,
            user=site.user,
            # As UTF-8, which MariaDB and MySQL clients send (PyMySQL would send a str
            # as latin-1, and fail on any other character).
            password=site.password.encode("utf-8"),
            database=site.database,
            unix_socket=site.unix_socket,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=max(1, round(timeout)),
            # Until `_bound` sets the same again, for the session's first statements.
            read_timeout=_client_wait(timeout),
            write_timeout=_client_wait(timeout),
            **_tls_arguments(site),
        )
        pooled = Pooled(connection, login_of(site), timeout)
        try:
            pooled.server_version = _prepare(connection)
            _bound(pooled, timeout, first=True)
        except BaseException:
            connection.close()
            raise
        version = pooled.server_version
        emit(
            log, logging.DEBUG, "connected", site=site.name, endpoint=site.endpoint, server=version
        )
        return pooled

    def _drop(self) -> None:
        pooled, self._pooled = self._pooled, None
        self.lost = True
        if pooled is None:
            return
        if self._pool is not None:
            self._pool.discard(pooled)
        else:
            pooled.close()


# How much longer than the server's statement timeout the client waits for an answer.
CLIENT_GRACE_SECONDS = 2
# Bytes a GROUP_CONCAT may give (MySQL's default cuts it at 1,024).
GROUP_CONCAT_MAX_LEN = 1 << 20


def lock_wait_seconds(timeout: float) -> int | None:
    """How long a statement waits for a table lock (whole seconds, as the server takes
    them): half the query timeout, so that a site behind a `LOCK TABLES`, a backup or an
    `ALTER TABLE` gives its round back early instead of holding one of the server's
    connections for every statement's full timeout. None below a 2 s query timeout: a
    whole second would not be shorter, and which of the two fired first would be chance."""
    seconds = int(timeout / 2)
    return seconds if seconds >= 1 else None


def _prepare(connection: pymysql.connections.Connection[Any]) -> str:
    """Makes the session read-only; the server's version."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        row = cursor.fetchone()
        version = str(row[0]) if row else ""
        # Whatever the server's defaults: no statement uses GROUP_CONCAT now (the table
        # statistics are looked up by name, joined by CONCAT_WS, which it does not
        # bound), and one a collector adds is not cut at MySQL's 1,024 bytes.
        cursor.execute("SET SESSION TRANSACTION READ ONLY")
        cursor.execute("SET SESSION group_concat_max_len = %s", (GROUP_CONCAT_MAX_LEN,))
    return version


def _bound(pooled: Pooled, timeout: float, *, first: bool = False) -> None:
    """Bounds every statement of the connection by `timeout` on the server side (and its
    lock waits by half of it), and the client's wait for an answer a little longer, so
    that the server's own error, which names the cause, arrives first. `first`: on a new
    connection, whose lock wait is the server's default."""
    connection = pooled.connection
    lock_wait = lock_wait_seconds(timeout)
    if "mariadb" in pooled.server_version.lower():
        settings = ["max_statement_time = %s"]
        values: list[object] = [timeout]
    else:
        settings = ["max_execution_time = %s"]
        values = [int(timeout * 1000)]
    if lock_wait is not None:
        settings.append("lock_wait_timeout = %s")
        values.append(lock_wait)
    elif not first:
        settings.append("lock_wait_timeout = DEFAULT")
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION " + ", SESSION ".join(settings), values)
    _set_client_wait(connection, _client_wait(timeout))
    pooled.bound = timeout


def _client_wait(timeout: float) -> int:
    """Whole seconds the client waits for an answer to a statement the server stops at
    `timeout`: a little longer, so that the server's own error, which names the cause,
    arrives first."""
    return max(1, round(timeout + CLIENT_GRACE_SECONDS))


def _set_client_wait(connection: pymysql.connections.Connection[Any], seconds: int) -> None:
    """How long the client waits for the server to answer or take a statement, from the
    next one on (PyMySQL takes them at connecting only, and applies its attributes at
    each read and write)."""
    connection._read_timeout = seconds  # type: ignore[attr-defined]
    connection._write_timeout = seconds  # type: ignore[attr-defined]


def _grants(connection: pymysql.connections.Connection[Any]) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SHOW GRANTS")
        return [str(row[0]) for row in cursor.fetchall()]


def _tls_arguments(site: SiteConfig) -> dict[str, Any]:
    tls = site.tls
    if not tls.enabled:
        return {}
    return {
        "ssl_ca": tls.ca_file,
        "ssl_cert": tls.cert_file,
        "ssl_key": tls.key_file,
        "ssl_verify_cert": tls.verify,
        "ssl_verify_identity": tls.verify,
    }


class _Billing:
    """`Session.billed_to`'s block (a plain class: a thousand sites' round enters a dozen
    per site, and a generator-based context manager costs several times as much)."""

    __slots__ = ("_meter", "_previous", "_session")

    def __init__(self, session: Session, meter: Meter) -> None:
        self._session = session
        self._meter = meter
        self._previous: Meter | None = None

    def __enter__(self) -> None:
        self._previous, self._session._meter = self._session._meter, self._meter

    def __exit__(self, *_: object) -> None:
        self._session._meter = self._previous
