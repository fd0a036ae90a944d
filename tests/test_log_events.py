"""Counters and histograms from the log: exact values after each step of scripted
histories, across row limits, purges, truncation, restarts, gaps and concurrent writers."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.metrics import catalog
from testbed import as4, schedules
from testbed.mariadb import Server, start_private, temporary
from testbed.messages import GERMAN
from testbed.store import ActionSchedulerStore
from tests.support.follower import Follow, Follower
from tests.support.scenarios import as4_corrupted_and_worker, as4_daily_cleanup
from tests.support.truth import log_events
from tests.support.waiting import wait_until


def fail_mailchimp(hook: str) -> str | None:
    return "Supplier API unreachable" if hook == "mailchimp_sync_order" else None


def test_all_events_and_failure_reasons(store: ActionSchedulerStore, follow: Follow) -> None:
    exporter = follow()
    exporter.scrape()
    for index in range(4):
        store.create("woocommerce_deliver_webhook_async", group="webhooks", args=[index])
        store.create("mailchimp_sync_order", group="mailchimp", args=[index])
    store.run_batch(8, fail_mailchimp)  # 4 complete, 4 exception
    renamed = store.create("renamed_hook")
    claim = store.stake_claim(1)
    store.start(renamed)
    store.fail_without_callback(renamed, "renamed_hook")  # no_callback
    store.release_claim(claim.claim_id)
    crashing = store.create("import_products", group="imports")
    claim = store.stake_claim(1)
    store.start(crashing)
    store.fatal(crashing, claim.claim_id)  # fatal
    with store.seconds_ago(900):
        store.create("woocommerce_deliver_webhook_async", group="webhooks")
        store.create("woocommerce_deliver_webhook_async", group="webhooks")
        store.kill_worker_mid_batch(batch_size=2, finished=0)  # one started, one claimed
    assert store.cleaner_reset() == 1  # reset
    assert store.cleaner_mark_failed() == 1  # timeout
    store.cancel(store.create("woocommerce_cancel_unpaid_orders"))

    exporter.scrape()
    # every counter of a (hook, group) pair exists from the pair's first event on
    for reason in catalog.FAILURE_REASONS:
        assert any(
            s.metric is catalog.FAILED
            and dict(s.labels)["reason"] == reason
            and dict(s.labels)["hook"] == "woocommerce_cancel_unpaid_orders"
            for s in exporter.last.samples  # type: ignore[union-attr]
        )
    assert exporter.total(catalog.CREATED) == 4 + 4 + 1 + 1 + 2 + 1
    assert exporter.total(catalog.CREATED, group="webhooks") == 6
    assert exporter.total(catalog.STARTED) == 8 + 1 + 1 + 1
    assert exporter.total(catalog.COMPLETED) == 4
    assert exporter.total(catalog.COMPLETED, hook="woocommerce_deliver_webhook_async") == 4
    assert exporter.total(catalog.FAILED, reason="exception") == 4
    assert exporter.total(catalog.FAILED, reason="exception", hook="mailchimp_sync_order") == 4
    assert exporter.total(catalog.FAILED, reason="no_callback", hook="renamed_hook") == 1
    assert exporter.total(catalog.FAILED, reason="fatal", hook="import_products") == 1
    assert exporter.total(catalog.FAILED, reason="timeout", group="webhooks") == 1
    assert exporter.total(catalog.FAILED, reason="unknown") == 0
    assert exporter.total(catalog.CANCELED) == 1
    assert exporter.total(catalog.RESET, hook="woocommerce_deliver_webhook_async") == 1
    assert exporter.total(catalog.LOG_ROWS_UNCLASSIFIED) == 0


def test_translated_messages_still_count_completions_and_failures(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    """A German site: starts are read from the runner's context at the end of their row,
    outcomes from the action's status; reasons stay unknown."""
    exporter = follow()
    exporter.scrape()
    done = store.create("woocommerce_deliver_webhook_async")
    broken = store.create("mailchimp_sync_order")
    with store.connection.cursor() as cursor:
        cursor.execute("UPDATE wp_actionscheduler_logs SET message = 'Aktion erstellt'")
    for action_id, error in ((done, None), (broken, "Lieferant nicht erreichbar")):
        store._execute(
            "UPDATE wp_actionscheduler_actions SET status = 'in-progress',"
            " attempts = 1 WHERE action_id = %s",
            (action_id,),
        )
        store.log(action_id, "Aktion gestartet über WP CLI")
        if error is None:
            store._execute(
                "UPDATE wp_actionscheduler_actions SET status = 'complete' WHERE action_id = %s",
                (action_id,),
            )
            store.log(action_id, "Aktion abgeschlossen über WP CLI")
        else:
            store._execute(
                "UPDATE wp_actionscheduler_actions SET status = 'failed' WHERE action_id = %s",
                (action_id,),
            )
            store.log(action_id, f"Aktion fehlgeschlagen über WP CLI: {error}")
    exporter.scrape()
    assert exporter.total(catalog.COMPLETED) == 1
    assert exporter.total(catalog.FAILED) == 1
    assert exporter.total(catalog.FAILED, reason="unknown") == 1
    assert exporter.total(catalog.STARTED) == 2
    # "action created" rows are not guessed at
    assert exporter.total(catalog.LOG_ROWS_UNCLASSIFIED) == 2
    assert exporter.total(catalog.LOG_ROWS_READ) == 6


def test_histograms_have_exact_buckets(store: ActionSchedulerStore, follow: Follow) -> None:
    exporter = follow()
    exporter.scrape()
    with store.frozen() as now:
        with store.seconds_ago(100):
            late = store.create(
                "wc_admin_import_orders", group="imports", scheduled=now - dt.timedelta(seconds=220)
            )
            on_time = store.create("woocommerce_deliver_webhook_async", group="webhooks")
            store.start(late)  # 120 s after its scheduled date
            store.start(on_time)  # in the same second as scheduled: delay 0
        with store.seconds_ago(60):
            store.complete(late)  # ran 40 s
        store.complete(on_time)  # ran 100 s

    exporter.scrape()
    delay = exporter.buckets(catalog.START_DELAY, group="imports")
    assert delay["60.0"] == 0 and delay["120.0"] == 1 and delay["+Inf"] == 1
    assert exporter.buckets(catalog.START_DELAY, group="webhooks")["0.5"] == 1
    duration = exporter.buckets(catalog.RUN_DURATION, hook="wc_admin_import_orders")
    assert duration["30.0"] == 0 and duration["60.0"] == 1
    duration = exporter.buckets(catalog.RUN_DURATION, hook="woocommerce_deliver_webhook_async")
    assert duration["60.0"] == 0 and duration["120.0"] == 1
    sums = {
        dict(s.labels)["hook"]: s.value
        for s in exporter.last.samples  # type: ignore[union-attr]
        if s.metric is catalog.RUN_DURATION and s.suffix == "_sum"
    }
    assert sums == {"wc_admin_import_orders": 40, "woocommerce_deliver_webhook_async": 100}


def test_a_burst_larger_than_the_row_limit_is_absorbed_over_several_scrapes(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    exporter = follow(log_rows_per_scrape=50)
    exporter.scrape()
    for index in range(60):
        store.create("woocommerce_deliver_webhook_async", args=[index])
    store.run_batch(60)  # 60 created + 60 started + 60 complete = 180 rows

    reads = []
    lags = []
    while True:
        before = exporter.total(catalog.LOG_ROWS_READ)
        exporter.scrape()
        reads.append(exporter.total(catalog.LOG_ROWS_READ) - before)
        lags.append(exporter.total(catalog.LOG_CURSOR_LAG))
        if lags[-1] == 0:
            break
    assert reads == [50, 50, 50, 30]
    assert lags == [130, 80, 30, 0]
    assert exporter.total(catalog.CREATED) == 60
    assert exporter.total(catalog.STARTED) == 60
    assert exporter.total(catalog.COMPLETED) == 60
    # When a start and its end were read by different scrapes, the duration still counts.
    assert exporter.total(catalog.RUN_DURATION) == 60


def test_restart_starts_from_the_newest_row_and_never_replays(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    first = follow()
    first.scrape()
    for index in range(5):
        store.create("woocommerce_deliver_webhook_async", args=[index])
    first.scrape()
    assert first.total(catalog.CREATED) == 5

    restarted = follow()
    restarted.scrape()
    assert restarted.total(catalog.CREATED) == 0
    assert restarted.total(catalog.LOG_CURSOR_LAG) == 0
    store.create("woocommerce_deliver_webhook_async")
    restarted.scrape()
    first.scrape()
    assert restarted.total(catalog.CREATED) == 1
    # Two exporters on the same site each count every event exactly once.
    assert first.total(catalog.CREATED) == 6


def test_purge_and_truncation(store: ActionSchedulerStore, follow: Follow) -> None:
    exporter = follow()
    with store.seconds_ago(40 * 86400):
        for index in range(3):
            store.run_action(store.create("old_import", args=[index]))
    exporter.scrape()
    store.create("woocommerce_deliver_webhook_async")
    assert store.purge() == 3  # deletes old actions and their (already read) logs
    exporter.scrape()
    assert exporter.total(catalog.CREATED) == 1
    assert exporter.total(catalog.LOG_CURSOR_RESETS) == 0

    store._execute("TRUNCATE TABLE wp_actionscheduler_logs")
    store.create("woocommerce_deliver_webhook_async")
    store.create("woocommerce_deliver_webhook_async")
    exporter.scrape()
    assert exporter.total(catalog.LOG_CURSOR_RESETS) == 1
    assert exporter.total(catalog.CREATED) == 3
    store.create("woocommerce_deliver_webhook_async")
    exporter.scrape()
    assert exporter.total(catalog.CREATED) == 4


def test_ids_committed_out_of_order_are_counted_once(
    store: ActionSchedulerStore, follow: Follow, mariadb: Server, database: str
) -> None:
    exporter = follow()
    exporter.scrape()
    action = store.create("woocommerce_deliver_webhook_async")
    slow = mariadb.connect(database)
    slow.autocommit(False)
    with slow.cursor() as cursor:  # takes the next log_id, commits later
        cursor.execute(
            "INSERT INTO wp_actionscheduler_logs (action_id, message, log_date_gmt,"
            " log_date_local) VALUES (%s, 'action started via WP CLI',"
            " UTC_TIMESTAMP(), UTC_TIMESTAMP())",
            (action,),
        )
    store.create("woocommerce_deliver_webhook_async")  # a later id, committed first
    exporter.scrape()
    assert exporter.total(catalog.CREATED) == 2
    assert exporter.total(catalog.STARTED) == 0
    slow.commit()
    slow.close()
    exporter.scrape()
    exporter.scrape()
    assert exporter.total(catalog.STARTED) == 1
    assert exporter.total(catalog.CREATED) == 2
    assert exporter.total(catalog.LOG_ROWS_READ) == 3


def test_a_gap_that_never_fills_is_given_up(
    store: ActionSchedulerStore, follow: Follow, mariadb: Server, database: str
) -> None:
    exporter = follow(log_gap_grace=0.2)
    exporter.scrape()
    rolled_back = mariadb.connect(database)
    rolled_back.autocommit(False)
    with rolled_back.cursor() as cursor:
        cursor.execute("INSERT INTO wp_actionscheduler_logs (action_id, message) VALUES (1, 'x')")
    rolled_back.rollback()
    rolled_back.close()
    store.create("woocommerce_deliver_webhook_async")
    exporter.scrape()
    # Held below the gap: the gap is unread, the row read beyond it is not (issue 25).
    assert exporter.total(catalog.LOG_CURSOR_LAG) == 1
    exporter.scrape()
    assert exporter.total(catalog.LOG_CURSOR_LAG) == 1  # still: the grace has not passed
    exporter.clock.advance(0.3)
    exporter.scrape()
    assert exporter.total(catalog.LOG_CURSOR_LAG) == 0
    assert exporter.total(catalog.CREATED) == 1


def test_counts_are_exact_with_concurrent_writers(
    store: ActionSchedulerStore, follow: Follow, mariadb: Server, database: str
) -> None:
    exporter = follow(log_rows_per_scrape=200)
    exporter.scrape()
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        own = ActionSchedulerStore(mariadb.connect(database))
        batches = 0
        while not stop.is_set():
            for index in range(5):
                own.create("woocommerce_deliver_webhook_async", args=[index])
            own.run_batch(5, lambda hook: None)
            batches += 1
        written.append(batches)
        own.connection.close()

    threads = [threading.Thread(target=writer) for _ in range(3)]
    for thread in threads:
        thread.start()

    def scraped_while_writing() -> bool:
        exporter.scrape()
        with store.connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM wp_actionscheduler_actions")
            return int(cursor.fetchone()[0]) >= 150  # ten batches of each writer

    assert wait_until(scraped_while_writing, 60, interval=0.05)
    stop.set()
    for thread in threads:
        thread.join()
    while exporter.scrape() and exporter.total(catalog.LOG_CURSOR_LAG) > 0:
        pass
    with store.connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM wp_actionscheduler_logs")
        (rows,) = cursor.fetchone()
        cursor.execute("SELECT COUNT(*), SUM(status = 'complete') FROM wp_actionscheduler_actions")
        created, completed = cursor.fetchone()
    assert len(written) == 3 and sum(written) > 0  # every writer ran to the end
    assert exporter.total(catalog.LOG_ROWS_READ) == rows
    assert exporter.total(catalog.CREATED) == created
    assert exporter.total(catalog.STARTED) == completed
    assert exporter.total(catalog.COMPLETED) == completed


def test_a_table_truncated_and_refilled_past_the_cursor_is_a_reset(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    """Issue 13, item 13: ids that come back past the cursor between two scrapes were
    not noticed; the last row read now holding another action tells."""
    for index in range(2):
        store.create("woocommerce_deliver_webhook_async", args=[index])
    exporter = follow()
    exporter.scrape()
    for index in range(3):
        store.create("woocommerce_deliver_webhook_async", args=[10 + index])
    exporter.scrape()
    assert exporter.total(catalog.CREATED) == 3
    store._execute("TRUNCATE TABLE wp_actionscheduler_logs")
    for index in range(6):  # log ids 1 to 6: past the cursor (5)
        store.create("woocommerce_send_email", args=[index])
    exporter.scrape()
    assert exporter.total(catalog.LOG_CURSOR_RESETS) == 1
    assert exporter.total(catalog.CREATED, hook="woocommerce_send_email") == 6


def test_deleting_every_log_row_is_not_a_reset(store: ActionSchedulerStore, follow: Follow) -> None:
    """Issue 13, item 13: the ids of a table whose rows were all deleted keep counting up."""
    store.create("woocommerce_deliver_webhook_async")
    exporter = follow()
    exporter.scrape()
    store.create("woocommerce_deliver_webhook_async", args=[1])
    exporter.scrape()
    store._execute("DELETE FROM wp_actionscheduler_logs")
    exporter.scrape()
    assert exporter.total(catalog.LOG_CURSOR_LAG) == 0
    store.create("woocommerce_send_email")
    exporter.scrape()
    assert exporter.total(catalog.LOG_CURSOR_RESETS) == 0
    assert exporter.total(catalog.CREATED) == 2
    assert exporter.total(catalog.LOG_ROWS_MISSED) == 0


def test_rows_deleted_before_they_were_read_are_counted_as_missed(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    """Issue 13, item 18: a canceled action that never ran is deleted with its log rows at
    the next queue run; those events cannot be counted, but the loss is."""
    exporter = follow(log_gap_grace=30)
    exporter.scrape()
    canceled = store.create("woocommerce_cancel_unpaid_orders")
    store.cancel(canceled)
    store._execute("DELETE FROM wp_actionscheduler_logs WHERE action_id = %s", (canceled,))
    store._execute("DELETE FROM wp_actionscheduler_actions WHERE action_id = %s", (canceled,))
    store.create("woocommerce_deliver_webhook_async")
    exporter.scrape()
    assert exporter.total(catalog.LOG_ROWS_MISSED) == 0  # they may still commit
    exporter.clock.advance(31)
    exporter.scrape()
    assert exporter.total(catalog.LOG_ROWS_MISSED) == 2
    assert exporter.total(catalog.CREATED) == 1
    assert exporter.total(catalog.CANCELED) == 0


def test_ids_a_galera_stride_apart_are_counted_without_gaps() -> None:
    """Issue 25, item 7a: on a server with auto_increment_increment 3 (as Galera sets it),
    1,000 actions gave 3,000 missed rows and a lag of 6,000, and with a small row limit the
    cursor parked below the first gap. A server of the test's own, with that setting."""

    def stride_3(workdir: Path) -> Server:
        arguments = ["--auto-increment-increment=3", "--auto-increment-offset=2"]
        return start_private(workdir, extra_arguments=arguments)

    with temporary(stride_3) as server:
        with server.connect() as connection, connection.cursor() as cursor:
            cursor.execute("CREATE DATABASE shop")
        store = ActionSchedulerStore(server.connect("shop"))
        store.create_tables()
        store.create("woocommerce_deliver_webhook_async", args=[-1])
        site = SiteConfig(
            name="shop", host=server.host, port=server.port, user=server.user,
            password=server.password, database="shop", log_rows_per_scrape=10,
        )  # fmt: skip
        exporter = Follower(site)
        try:
            exporter.scrape()
            for index in range(40):
                store.create("woocommerce_deliver_webhook_async", args=[index])
            for _ in range(6):
                exporter.clock.advance(60)  # past the gap grace: nothing is a gap
                exporter.scrape()
            assert exporter.total(catalog.CREATED) == 40
            assert exporter.total(catalog.LOG_ROWS_MISSED) == 0
            assert exporter.total(catalog.LOG_CURSOR_LAG) == 0
        finally:
            exporter.close()
            store.connection.close()


def test_a_plain_4x_site_is_read_whole(store: ActionSchedulerStore, follow: Follow) -> None:
    """Issue 38: every row a 4.x site writes (the daily cleanup and its continuation, the
    purge of failed actions, corrupted actions canceled, runs by `wp action-scheduler
    work`) is recognised, counted as the rows left say, and none is left unclassified."""
    exporter = follow(log_gap_grace=30)
    exporter.scrape()
    as4_daily_cleanup(store)
    as4_corrupted_and_worker(store)
    exporter.scrape()
    exporter.clock.advance(31)  # the purged rows' ids are given up: missed, not waited for
    exporter.scrape()
    expected = log_events(store.connection)
    assert exporter.total(catalog.LOG_ROWS_UNCLASSIFIED) == 0
    assert exporter.total(catalog.LOG_ROWS_READ) == expected.rows
    assert exporter.total(catalog.CREATED) == expected.created
    assert exporter.total(catalog.STARTED) == sum(expected.started_by_context.values())
    assert set(expected.started_by_context) == {"WP CLI", as4.WORKER}  # both dedicated
    assert exporter.total(catalog.STARTED_BY_RUNNER, runner="wp_cli") == sum(
        expected.started_by_context.values()
    )
    assert exporter.total(catalog.STARTED_BY_RUNNER, runner="other") == 0
    assert exporter.total(catalog.COMPLETED) == expected.completed
    assert exporter.total(catalog.FAILED) == expected.failed
    assert exporter.total(catalog.CANCELED) == expected.canceled
    assert expected.corrupted == 2
    assert exporter.total(catalog.CORRUPTED_CANCELED) == expected.corrupted
    assert exporter.total(catalog.CORRUPTED_CANCELED, hook="woocommerce_cleanup_sessions") == 1
    # Their earlier rows (started, canceled) were cleared before they were read.
    assert exporter.total(catalog.LOG_ROWS_MISSED) > 0
    assert exporter.total(catalog.RECURRING_STOPPED) == 0


def test_a_corrupted_action_read_before_its_logs_are_cleared_counts_once(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    """A logger that keeps the rows (or a scrape between them): the start and the
    cancellation count as such, the corrupt-data row as its own event."""
    exporter = follow()
    exporter.scrape()
    action_id = store.create("wc_admin_import_orders", group="wc-admin-data")
    claim = store.stake_claim(1)
    as4.cancel_corrupted(store, action_id, clear_logs=False)
    store.release_claim(claim.claim_id)
    exporter.scrape()
    assert exporter.total(catalog.STARTED_BY_RUNNER, runner="wp_cli") == 1
    assert exporter.total(catalog.CANCELED, hook="wc_admin_import_orders") == 1
    assert exporter.total(catalog.CORRUPTED_CANCELED, group="wc-admin-data") == 1
    assert exporter.total(catalog.LOG_ROWS_UNCLASSIFIED) == 0


def test_a_plugins_own_row_after_a_recurring_run_is_not_a_stop(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    """Issue 36, item 5: on an English site a webhook plugin logs its own row after the
    run; Action Scheduler wrote no stop, so none is counted (the row is unclassified)."""
    exporter = follow()
    exporter.scrape()
    action_id = store.create("woocommerce_deliver_webhook_async", schedule=schedules.INTERVAL)
    claim = store.stake_claim(1)
    assert store.run_recurring(action_id) is not None  # completed, next occurrence created
    store.log(action_id, "Webhook delivered: HTTP 200")
    store.release_claim(claim.claim_id)
    exporter.scrape()
    assert exporter.total(catalog.COMPLETED) == 1
    assert exporter.total(catalog.RECURRING_STOPPED) == 0
    assert exporter.total(catalog.LOG_ROWS_UNCLASSIFIED) == 1

    # A stop Action Scheduler writes is still one, in English as in a translation.
    failing = store.create("nightly_feed_export", schedule=schedules.INTERVAL)
    claim = store.stake_claim(1)
    store.run_recurring(failing, "Feed API down", next_instance_error="Invalid schedule")
    store.release_claim(claim.claim_id)
    exporter.scrape()
    assert exporter.total(catalog.RECURRING_STOPPED, reason="next_instance_failed") == 1


def test_no_callback_is_read_from_action_schedulers_own_words(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    """Issue 36, item 11: an exception that quotes "will not be executed as no callbacks
    are registered." is an exception; only Action Scheduler's own message (which begins
    "Scheduled action for HOOK") is no_callback, whatever the runner's context."""
    exporter = follow()
    exporter.scrape()
    quoting, renamed, via_worker = (
        store.create("mailchimp_sync_order"),
        store.create("renamed_hook"),
        store.create("renamed_in_worker"),
    )
    claim = store.stake_claim(3)
    for action_id in claim.action_ids:
        store.start(action_id, via=as4.WORKER)
    store.fail(
        quoting,
        "Upstream said: Scheduled action for x will not be executed as no callbacks are "
        "registered.",
        via=as4.WORKER,
    )
    store.fail_without_callback(renamed, "renamed_hook")
    store.fail_without_callback(via_worker, "renamed_in_worker", via=as4.WORKER)
    store.release_claim(claim.claim_id)
    exporter.scrape()
    assert exporter.total(catalog.FAILED, hook="mailchimp_sync_order", reason="exception") == 1
    assert exporter.total(catalog.FAILED, reason="no_callback") == 2
    assert exporter.total(catalog.FAILED, hook="renamed_in_worker", reason="no_callback") == 1


def test_a_german_4x_site_counts_worker_runs_and_corrupted_actions(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    """A German 4.x site: runs of `wp action-scheduler work` are read from the context
    "WP CLI Worker" left at the end of the translated start (runner wp_cli, though no
    start by a context of 3.x was seen to learn the words from); a corrupted action's only
    row counts as its cancellation."""
    store.messages = GERMAN
    exporter = follow()
    exporter.scrape()
    as4_corrupted_and_worker(store)
    exporter.scrape()
    runs = 10 + 10 + 1  # payments, mailchimp, the recurring sales job
    assert exporter.total(catalog.STARTED_BY_RUNNER, runner="wp_cli") == runs
    assert exporter.total(catalog.STARTED_BY_RUNNER, runner="other") == 0
    assert exporter.total(catalog.COMPLETED) == 11
    assert exporter.total(catalog.FAILED, reason="unknown") == 10
    assert exporter.total(catalog.CANCELED) == 2
    assert exporter.total(catalog.RECURRING_STOPPED) == 0
