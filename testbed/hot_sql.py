"""The hot tier's queries, captured from the exporter's own collectors and replayed raw.

The statements are not copied into the benchmark: a session that records what it runs
is handed to the real collectors, so the benchmark measures exactly what a scrape sends.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import pymysql

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import in_database
from actionscheduler_exporter.db.session import Row, Session
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.timing import Deadline
from testbed.generate import PREFIX
from testbed.mariadb import Server
from testbed.rows_read import session_rows_examined

Statement = tuple[str, tuple[object, ...] | None]


class RecordingSession(Session):
    def __init__(self, site: SiteConfig) -> None:
        super().__init__(site, check_grants=False)
        self.statements: list[Statement] = []

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        self._record(sql, args)
        return super().query(sql, args)

    def query_typed(
        self, sql: str, args: Sequence[object] | None = None
    ) -> tuple[list[Row], tuple[int, ...]]:
        self._record(sql, args)
        return super().query_typed(sql, args)

    def _record(self, sql: str, args: Sequence[object] | None) -> None:
        """As sent: its tables in the site's database."""
        sql, args = in_database(sql, args, self._site.database)
        self.statements.append((sql, tuple(args) if args is not None else None))


def store_site(server: Server, database: str) -> SiteConfig:
    """A generated store's site, as the exporter would be configured for it."""
    return SiteConfig(
        name="bench",
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=database,
        table_prefix=PREFIX,
        query_timeout=60.0,
    )


def hot_statements(site: SiteConfig) -> list[Statement]:
    """What one steady-state round of the site's hot tier sends to the database: a real
    round (its combined statement, then what the collectors send on their own), with the
    due split read at every round, as the benchmark's exporter is configured."""
    session = RecordingSession(site)
    site = dataclasses.replace(site, due_split_interval=0)
    sources = site_sources(site).without_heavy()
    site_round = MonitoredSite(site, sources=sources, session=session)
    try:
        site_round.run(Deadline(time.monotonic() + 600, time.monotonic))  # places the log cursor
        session.statements.clear()
        site_round.run(Deadline(time.monotonic() + 600, time.monotonic))
        return list(session.statements)
    finally:
        site_round.close()


def replay(
    connection: pymysql.connections.Connection[Any], statements: Sequence[Statement]
) -> None:
    with connection.cursor() as cursor:
        for sql, args in statements:
            cursor.execute(sql, args)
            cursor.fetchall()


def explain(
    connection: pymysql.connections.Connection[Any], statements: Sequence[Statement]
) -> list[dict[str, Any]]:
    """Per statement: its plan (which index each table is read by) and the rows it really
    read, from the session's handler counters (after a warm-up run)."""
    explained = []
    for sql, args in statements:
        one = [(sql, args)]
        replay(connection, one)
        examined = session_rows_examined(connection, partial(replay, connection, one))
        with connection.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute("EXPLAIN " + sql, args)
            plan = [
                {
                    "table": row["table"],
                    "type": row["type"],
                    "key": row["key"],
                    "extra": row["Extra"],
                }
                for row in cursor.fetchall()
            ]
        explained.append({"sql": " ".join(sql.split()), "rows_examined": examined, "plan": plan})
    return explained
