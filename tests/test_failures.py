"""Bad input and broken databases: a clear answer, never a crash, other sites unaffected."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.budget import ScrapeBudget
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.scrape.pending import PendingScrape
from actionscheduler_exporter.timing import Deadline
from testbed.mariadb import Server, start_private
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.support.locks import lock_tables, lock_waits, tables_locked
from tests.support.truth import compute
from tests.support.waiting import wait_until


def errors(result: SiteResult, kind: str) -> float | None:
    return result.value(catalog.ERRORS.name, kind=kind)


def test_missing_tables_mark_the_site_down_and_name_the_table(
    store: ActionSchedulerStore,
    scrape: Scrape,
    site: Callable[..., SiteConfig],
    caplog: pytest.LogCaptureFixture,
) -> None:
    store.connection.cursor().execute("DROP TABLE wp_actionscheduler_claims")
    with caplog.at_level(logging.WARNING):
        (result,) = scrape()
    assert not result.up
    assert result.value("actionscheduler_up") == 0
    assert result.value("actionscheduler_table_exists", table="claims") == 0
    assert result.value("actionscheduler_table_exists", table="actions") == 1
    assert errors(result, "missing_table") == 1
    assert "wp_actionscheduler_claims" in caplog.text
    assert "wp_actionscheduler_claims" in result.problems[0]


def test_wrong_prefix_and_other_sites_unaffected(
    store: ActionSchedulerStore, scrape: Scrape, site: Callable[..., SiteConfig]
) -> None:
    store.create("woocommerce_deliver_webhook_async")
    results = {
        r.label: r
        for r in scrape(
            site(name="good"),
            site(name="typo", table_prefix="wp2_"),
            site(name="down", host="127.0.0.1", port=1, query_timeout=1.0),
            site(name="empty-network", table_prefix="auto", database="mysql"),
        )
    }
    assert results["good"].up
    assert results["good"].value("actionscheduler_due_actions", claim="unclaimed") == 1
    assert not results["typo"].up
    assert results["typo"].value("actionscheduler_table_exists", table="actions") == 0
    assert not results["down"].up and errors(results["down"], "connect") == 1
    assert not results["empty-network"].up
    assert "no table named *actionscheduler_actions" in results["empty-network"].problems[0]


def test_wrong_password_is_reported_without_the_password(
    store: ActionSchedulerStore,
    scrape: Scrape,
    mariadb: Server,
    database: str,
    site: Callable[..., SiteConfig],
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin = mariadb.connect()
    with admin.cursor() as cursor:
        cursor.execute("CREATE USER IF NOT EXISTS 'as_wrongpw'@'%' IDENTIFIED BY 'right-one'")
    try:
        with caplog.at_level(logging.DEBUG):
            (result,) = scrape(site(user="as_wrongpw", password="wrong-secret-123"))
        assert not result.up and errors(result, "connect") == 1
        assert "Access denied" in result.problems[0]
        assert "wrong-secret-123" not in caplog.text + " ".join(result.problems)
        assert all("wrong-secret-123" not in str(s.labels) for s in result.samples)
    finally:
        with admin.cursor() as cursor:
            cursor.execute("DROP USER IF EXISTS 'as_wrongpw'@'%'")
        admin.close()


def test_bad_rows_are_counted_not_fatal(store: ActionSchedulerStore, scrape: Scrape) -> None:
    """Corrupted data Action Scheduler would not write, but real databases contain."""
    good = store.create("woocommerce_deliver_webhook_async", group="webhooks")
    odd = store.create("legacy_plugin_hook")
    null_dated = store.create("imported_hook")
    store.create("hook_with_deleted_group", group="gone")
    with store.connection.cursor() as cursor:
        cursor.execute(
            "UPDATE wp_actionscheduler_actions SET status = 'in-process' WHERE action_id = %s",
            (odd,),
        )
        cursor.execute(
            "UPDATE wp_actionscheduler_actions SET scheduled_date_gmt = NULL WHERE action_id = %s",
            (null_dated,),
        )
        cursor.execute("DELETE FROM wp_actionscheduler_groups WHERE slug = 'gone'")
        cursor.execute(
            "UPDATE wp_actionscheduler_actions SET last_attempt_gmt = NULL WHERE action_id = %s",
            (good,),
        )
    (result,) = scrape()
    assert result.up, result.problems
    assert result.value("actionscheduler_actions", status="unknown") == 1
    assert result.value("actionscheduler_undated_pending_actions", date="null") == 1
    assert result.value("actionscheduler_due_actions", claim="unclaimed") == 2
    # No group and a group whose row was deleted are both "no group".
    assert result.value("actionscheduler_actions_by_group", status="pending", group="") == 2
    truth = compute(store.connection)
    assert truth.null_dated == 1 and truth.due_unclaimed == 2


def test_a_query_blocked_by_a_lock_times_out_and_the_rest_is_reported(
    store: ActionSchedulerStore,
    scrape: Scrape,
    mariadb: Server,
    database: str,
    site: Callable[..., SiteConfig],
) -> None:
    store.create("woocommerce_deliver_webhook_async")
    locker = mariadb.connect(database)
    try:
        with tables_locked(locker, ["wp_actionscheduler_claims"]):
            started = time.monotonic()
            (result,) = scrape(site(query_timeout=1.0), timeout=20)
            elapsed = time.monotonic() - started
    finally:
        locker.close()
    assert result.up
    assert result.value("actionscheduler_exporter_collector_success", collector="claims") == 0
    assert result.value("actionscheduler_exporter_collector_success", collector="due") == 1
    assert result.value("actionscheduler_due_actions", claim="unclaimed") == 1
    # The claims table is read by the claims and the anomalies collectors: both time out.
    assert result.value("actionscheduler_exporter_collector_success", collector="anomalies") == 0
    assert errors(result, "timeout") == 2
    assert elapsed < 10


def test_a_round_that_outlasts_the_scrape_reports_what_it_has_read(
    store: ActionSchedulerStore,
    scrape: Scrape,
    mariadb: Server,
    database: str,
    site: Callable[..., SiteConfig],
) -> None:
    """A locked claims table holds the round past the scrape's deadline: the collectors
    that answered report, the database is up, the one still waiting is marked. (The
    round's one statement waits for the lock first, 3 s here; then each collector reads
    alone, and the claims collector waits again while the scrape answers at 4 s.)"""
    store.create("woocommerce_deliver_webhook_async")
    locker = mariadb.connect(database)
    try:
        with tables_locked(locker, ["wp_actionscheduler_claims"]):
            (result,) = scrape(site(query_timeout=6.0), timeout=5.0)
    finally:
        locker.close()
    assert result.up
    assert result.value("actionscheduler_due_actions", claim="unclaimed") == 1
    success = catalog.COLLECTOR_SUCCESS.name
    assert result.value(success, collector="due") == 1
    assert result.value(success, collector="in_progress") == 1
    assert result.value(success, collector="claims") == 0
    assert result.value(success, collector="log_events") == 0
    assert errors(result, "deadline") == 1
    assert any("took longer than the scrape" in problem for problem in result.problems)


def test_database_down_at_start_then_back_then_gone_mid_scrape(
    private_server: Server, scrape: Scrape
) -> None:
    """The exporter starts with its database down, recovers, and survives losing it again,
    between scrapes and in the middle of one."""

    workdir = private_server.workdir
    assert workdir is not None
    port = private_server.port
    admin = private_server.connect()
    with admin.cursor() as cursor:
        cursor.execute("CREATE DATABASE shop")
    admin.close()
    writer = ActionSchedulerStore(private_server.connect("shop"))
    writer.create_tables()
    writer.create("woocommerce_deliver_webhook_async")
    writer.connection.close()
    private_server.stop()

    site = SiteConfig(name="shop", host="127.0.0.1", port=port, database="shop", query_timeout=2.0)
    coordinator = Coordinator(ExporterConfig(sites=(site,)))
    try:
        (down,) = coordinator.scrape(5)
        assert not down.up and errors(down, "connect") == 1

        restarted = start_private(workdir, port=port)
        (up,) = coordinator.scrape(5)
        assert up.up, up.problems
        assert up.value("actionscheduler_due_actions", claim="unclaimed") == 1

        restarted.stop()
        (lost,) = coordinator.scrape(5)
        assert not lost.up
        # A server that went away (2006, 2013) is a connection failure, not a query one.
        assert errors(lost, "connect") == 2
        assert errors(lost, "query") == 0

        again = start_private(workdir, port=port)
        (back,) = coordinator.scrape(5)
        assert back.up, back.problems
        # One connection for the site, not one per scrape.
        admin = again.connect()
        with admin.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = 'shop'")
            assert cursor.fetchone()[0] == 1
        admin.close()

        # The server goes away while a round waits on a locked table.
        locker = again.connect("shop")
        lock_tables(locker, ["wp_actionscheduler_claims"])  # released by the server's end
        mid: list[SiteResult] = []
        pending = threading.Thread(target=lambda: mid.extend(coordinator.scrape(10)))
        pending.start()
        watcher = again.connect()
        assert wait_until(lambda: lock_waits(watcher, "shop") >= 1, 10)
        watcher.close()
        # SIGKILL: a clean shutdown ends the locker's session first, and under load the
        # waiting query could then finish before the server closes the exporter's.
        assert again.process is not None
        again.process.kill()
        again.process.wait()
        pending.join()
        assert not mid[0].up
        assert errors(mid[0], "query") == 0  # lost during the query: kind connect
        assert (errors(mid[0], "connect") or 0) > (errors(back, "connect") or 0)
        assert mid[0].value("actionscheduler_exporter_collector_success", collector="claims") == 0

        final = start_private(workdir, port=port)
        (recovered,) = coordinator.scrape(5)
        assert recovered.up, recovered.problems
        final.stop()
    finally:
        coordinator.close()


def test_a_slow_round_is_shared_by_concurrent_scrapes(
    store: ActionSchedulerStore, mariadb: Server, database: str, site: Callable[..., SiteConfig]
) -> None:
    """While a round waits on a lock, every scrape that arrives joins it."""

    coordinator = Coordinator(ExporterConfig(sites=(site(query_timeout=3.0),)))
    locker = mariadb.connect(database)
    results: list[list[SiteResult]] = []
    joined: list[PendingScrape] = []

    def scrape() -> None:
        pending = coordinator.begin(ScrapeBudget(10.5))
        joined.append(pending)
        pending.wait()
        results.append(pending.results())

    def all_joined(observer: pymysql.connections.Connection[Any]) -> bool:
        return lock_waits(observer, database) >= 1 and len(joined) == 20

    threads = [threading.Thread(target=scrape) for _ in range(20)]
    observer = mariadb.connect()
    try:
        with tables_locked(locker, ["wp_actionscheduler_claims"]):
            for thread in threads:
                thread.start()
            # Unlock only once the round waits on the lock and every scrape has joined it.
            assert wait_until(lambda: all_joined(observer), 10)
            held_from = time.monotonic()
        held = time.monotonic() - held_from
    finally:
        locker.close()
        observer.close()
    for thread in threads:
        thread.join()
    coordinator.close()
    assert len(results) == 20
    # Every scrape got the very same round, which waited for the lock.
    assert len({id(pending.rounds[0]) for pending in joined}) == 1
    duration = catalog.SCRAPE_DURATION.name
    assert len({result.value(duration) for (result,) in results}) == 1
    (first,) = results[0]
    assert first.up
    assert (first.value("actionscheduler_exporter_scrape_duration_seconds") or 0) >= held


def test_a_round_still_waiting_for_a_thread_serves_nothing_of_the_last_one(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """With more sites than round threads a round can wait in the queue: a scrape that
    gives up on it must not be served the previous round's values as current."""
    coordinator = Coordinator(ExporterConfig(sites=(site(),)))
    try:
        (first,) = coordinator.scrape()
        assert first.up
        # No round runs now: the scrape gives up on one that has not started.
        (queued,) = coordinator.sites[0].finish(None, Deadline(0.0, time.monotonic))
    finally:
        coordinator.close()
    assert queued.up  # its last answer: waiting for a thread is not being down
    assert errors(queued, "deadline") == 1
    assert queued.value("actionscheduler_exporter_collector_success", collector="due") == 0
    assert queued.value("actionscheduler_due_actions", claim="unclaimed") is None
    # The heavy tier's last values are its own, refreshed apart: served as they are.
    assert queued.value("actionscheduler_exporter_collector_success", collector="status") == 1
    pending = first.value("actionscheduler_actions", status="pending")
    assert pending is not None
    assert queued.value("actionscheduler_actions", status="pending") == pending
