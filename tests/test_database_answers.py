"""What a DBA or a damaged table does to the answers, on a real MariaDB: a server error
that the exporter does not know is a failed statement, not a lost connection; a storm of
KILL QUERY on the exporter's connection never fails the scrape nor reports tables missing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext
from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore
from tests.support.scenarios import healthy_flow


def errors(result: Any, kind: str) -> float:
    return result.value("actionscheduler_exporter_errors", kind=kind) or 0.0


def test_a_logs_table_restored_without_its_key_is_still_read(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """Restored without its primary key, the logs table holds two rows of one log_id (the
    newest): the cursor neither stops nor restarts on it, and what is logged after it is
    counted."""
    healthy_flow(store)
    coordinator = Coordinator(ExporterConfig(sites=(site(),)))
    try:
        (first,) = coordinator.scrape(10)  # places the log cursor at the newest row
        healthy_flow(store)
        (second,) = coordinator.scrape(10)  # reads the new rows: the cursor has a last row
        assert first.up and second.up
        logs = store.logs
        with store.connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {logs} MODIFY log_id BIGINT UNSIGNED NOT NULL")
            cursor.execute(f"ALTER TABLE {logs} DROP PRIMARY KEY")
            cursor.execute(
                f"INSERT INTO {logs} (log_id, action_id, message, log_date_gmt, log_date_local)"
                f" SELECT log_id, action_id, message, log_date_gmt, log_date_local FROM {logs}"
                f" ORDER BY log_id DESC LIMIT 1"
            )
            cursor.execute(f"ALTER TABLE {logs} MODIFY log_id BIGINT UNSIGNED NOT NULL"
                           " AUTO_INCREMENT, ADD KEY (log_id)")  # fmt: skip
        (duplicated,) = coordinator.scrape(10)
        store.create("woocommerce_deliver_webhook_async", args=["after"])
        store.run_batch(1)
        (after,) = coordinator.scrape(10)
    finally:
        coordinator.close()
    success = "actionscheduler_exporter_collector_success"
    for result in (duplicated, after):
        assert result.up, result.problems
        assert result.value(success, collector="log_events") == 1
    assert (after.value("actionscheduler_exporter_log_cursor_resets") or 0) == 0
    finished = "actionscheduler_actions_finished"
    assert (
        sum(item.value for item in after.samples if item.name == f"{finished}_total")
        - sum(item.value for item in duplicated.samples if item.name == f"{finished}_total")
        == 1
    )


class _TwoRows(Collector):
    """A part of the round's statement that the server refuses with 1242 (a subquery of
    more than one row), as a damaged table gives."""

    name = "two_rows"
    metrics = ()

    def columns(self, context: DatabaseContext) -> Columns:
        return Columns(("SELECT 1 UNION SELECT 2",))

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        context.values_of(self)
        return iter(())


def test_a_part_of_the_round_statement_the_server_refuses_fails_its_collector_only(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """The whole statement fails with 1242: the rest is read apart, the site stays up,
    and only that part's collector fails, with kind `query` (not a lost connection)."""
    healthy_flow(store)
    coordinator = Coordinator(ExporterConfig(sites=(site(),)), extra_collectors=[_TwoRows()])
    try:
        results = [coordinator.scrape(10)[0] for _ in range(2)]
    finally:
        coordinator.close()
    success = "actionscheduler_exporter_collector_success"
    for result in results:
        assert result.up, result.problems
        assert result.value(success, collector="two_rows") == 0
        for collector in ("due", "claims", "in_progress", "log_events"):
            assert result.value(success, collector=collector) == 1, collector
    assert errors(results[-1], "query") >= 2
    assert errors(results[-1], "connect") == 0


def test_a_server_error_the_exporter_does_not_know_fails_the_statement_not_the_connection(
    site: Callable[..., SiteConfig],
) -> None:
    """A subquery of more than one row (1242), as a damaged table gives: kind `query`,
    and the connection stays (it is not a lost one)."""
    session = Session(site())
    try:
        with pytest.raises(QueryError) as raised:
            session.query("SELECT (SELECT 1 UNION SELECT 2)")
        assert raised.value.kind == "query" and not raised.value.connection_lost
        assert "1242" in raised.value.message
        assert session.connected
        assert session.query("SELECT 1") == [(1,)]
    finally:
        session.close()


def test_a_kill_query_storm_never_fails_the_scrape_nor_reports_missing_tables(
    store: ActionSchedulerStore,
    mariadb: Server,
    database: str,
    site: Callable[..., SiteConfig],
) -> None:
    """DBAs and pt-kill kill long statements on shared servers; MariaDB sometimes answers a
    killed statement with a row of NULLs and no error. Whatever each kill hits, every
    scrape returns, and no table is ever reported missing (they all exist)."""
    healthy_flow(store)
    user = f"asx_{database[-8:]}"
    admin = mariadb.connect()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'kill-pw'")
        cursor.execute(f"GRANT SELECT ON {database}.* TO '{user}'@'%'")
        cursor.execute(f"GRANT SELECT ON mysql.* TO '{user}'@'%'")
    config = site(user=user, password="kill-pw", table_prefix="auto")
    stop = threading.Event()
    kills = [0]

    def killer(connection: pymysql.connections.Connection[Any]) -> None:
        while not stop.is_set():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST"
                    " WHERE USER = %s AND COMMAND = 'Query'",
                    (user,),
                )
                for (thread_id,) in cursor.fetchall():
                    try:
                        cursor.execute(f"KILL QUERY {int(thread_id)}")
                        kills[0] += 1
                    except pymysql.err.MySQLError:
                        pass  # the statement ended first

    coordinator = Coordinator(ExporterConfig(sites=(config,)))
    thread = threading.Thread(target=killer, args=(mariadb.connect(),), daemon=True)
    thread.start()
    problems: list[str] = []
    try:
        for _ in range(60):
            for result in coordinator.scrape(10):
                problems += result.problems
    finally:
        stop.set()
        thread.join(30)
        coordinator.close()
        with admin.cursor() as cursor:
            cursor.execute(f"DROP USER '{user}'@'%'")
        admin.close()
    assert kills[0] > 0  # the storm reached the exporter's statements
    assert not [problem for problem in problems if "missing table" in problem]
    assert not [problem for problem in problems if "no table named" in problem]
