"""One read-only, time-limited database session per configured site.

The connection is opened lazily, reused across scrapes, and dropped after any error
that may have left it in an unknown state, so the next scrape opens a fresh one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import pymysql
import pymysql.err

from exporter.config.model import SiteConfig
from exporter.db.grants import can_write
from exporter.db.query_error import QueryError, classify
from exporter.db.tls_contexts import SharedContextConnection

log = logging.getLogger(__name__)

Row = tuple[Any, ...]


class Session:
    def __init__(self, site: SiteConfig, *, check_grants: bool = True) -> None:
        """`check_grants`: read the user's grants at each connection and warn when it may
        write (the scrape's session does; a second session of the same user need not)."""
        self._site = site
        self._check_grants = check_grants
        self._connection: pymysql.connections.Connection[Any] | None = None
        self._lock = threading.Lock()
        self.server_version = ""
        self.can_write = False
        # Time the statements sent on this session took (the database time it cost).
        self.statement_seconds = 0.0

    @property
    def connected(self) -> bool:
        return self._connection is not None

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        rows, _ = self._execute(sql, args)
        return rows

    def query_named(self, sql: str) -> list[dict[str, Any]]:
        """Rows as mappings of column name to value (for SHOW statements)."""
        rows, names = self._execute(sql, None)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _execute(
        self, sql: str, args: Sequence[object] | None
    ) -> tuple[list[Row], tuple[str, ...]]:
        with self._lock:
            connection = self._connect()
            started = time.perf_counter()
            try:
                with connection.cursor() as cursor:
                    cursor.execute(sql, args)
                    rows = list(cursor.fetchall())
                    names = tuple(column[0] for column in cursor.description or ())
                    return rows, names
            except pymysql.err.MySQLError as error:
                failure = classify(error, self._site.password)
                if failure.connection_lost:
                    self._drop()
                raise failure from error
            finally:
                self.statement_seconds += time.perf_counter() - started

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _connect(self) -> pymysql.connections.Connection[Any]:
        if self._connection is not None:
            return self._connection
        site = self._site
        timeout = site.query_timeout
        try:
            connection = SharedContextConnection(
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
                # The server stops a statement at `timeout`; the client waits a little longer
                # so that the server's own error, which names the cause, arrives first.
                read_timeout=max(1, round(timeout + 2)),
                write_timeout=max(1, round(timeout + 2)),
                **_tls_arguments(site),
            )
            self.server_version = _prepare(connection, timeout)
            if self._check_grants:
                self.can_write = _user_can_write(connection, site.database)
        except pymysql.err.MySQLError as error:
            raise classify(error, site.password, connecting=True) from error
        except OSError as error:  # TLS files unreadable, and similar local failures
            raise QueryError("connect", str(error), connection_lost=True) from error
        self._connection = connection
        if self.can_write:
            log.warning(
                "the database user may write site=%s user=%s: grant it SELECT on the "
                "four Action Scheduler tables only (README, 'The database user')",
                site.name,
                site.user,
            )
        log.debug(
            "connected site=%s endpoint=%s server=%s", site.name, site.endpoint, self.server_version
        )
        return connection

    def _drop(self) -> None:
        if self._connection is None:
            return
        # The server side may already be gone; there is nothing more to release then.
        with contextlib.suppress(pymysql.err.Error):
            self._connection.close()
        self._connection = None


def _prepare(connection: pymysql.connections.Connection[Any], timeout: float) -> str:
    """Makes the session read-only and bounds every statement on the server side."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        row = cursor.fetchone()
        version = str(row[0]) if row else ""
        cursor.execute("SET SESSION TRANSACTION READ ONLY")
        if "mariadb" in version.lower():
            cursor.execute("SET SESSION max_statement_time = %s", (timeout,))
        else:
            cursor.execute("SET SESSION max_execution_time = %s", (int(timeout * 1000),))
    return version


def _user_can_write(connection: pymysql.connections.Connection[Any], database: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SHOW GRANTS")
        return can_write([str(row[0]) for row in cursor.fetchall()], database)


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
