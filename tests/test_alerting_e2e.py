"""End to end: MariaDB queues driven into failure, the exporter, a real Prometheus with the
shipped rules (durations shortened by testbed.rules) and a real Alertmanager delivering to
a webhook of the test's own. Each failure's alert arrives with its labels and
annotations, the healthy site raises nothing, and losing the exporter is noticed too."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionscheduler_exporter.config.model import AlertThresholds
from testbed import schedules
from testbed.mariadb import Server, start_private, temporary
from testbed.store import ActionSchedulerStore
from tests.support.alertmanager import WebhookReceiver
from tests.support.end_to_end import EndToEnd
from tests.support.recurring import BATCH, FEED, NIGHTLY, PURGED, REPORT, STOCK, write_history
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
WAIT = 150.0
# As long as the failure run takes to raise all its alerts.
HEALTHY_RUN = 45.0

EXPECTED_WITH_SITES = {
    ("ActionSchedulerSiteDown", "gone"),
    ("ActionSchedulerQueueStalled", "stalled"),
    ("ActionSchedulerOldestDueActionLate", "stalled"),
    ("ActionSchedulerOldestDueActionPastDue", "stalled"),
    ("ActionSchedulerHookFailureRatio", "failing"),
    ("ActionSchedulerHookFailureRate", "failing"),
    ("ActionSchedulerNoCallbackFailures", "failing"),
    ("ActionSchedulerFatalErrors", "failing"),
    ("ActionSchedulerActionRunningTooLong", "killed"),
    ("ActionSchedulerTimeoutFailures", "killed"),
    ("ActionSchedulerOrphanedClaimsGrowing", "killed"),
    ("ActionSchedulerConcurrentBatchesAtLimit", "atlimit"),
    ("ActionSchedulerQueueStalled", "atlimit"),  # at the limit, nothing runs
    ("ActionSchedulerQueueRunByWebRequests", "webrun"),
    ("ActionSchedulerRecurringActionStopped", "recurring"),
    ("ActionSchedulerTimeoutFailures", "recurring"),  # its recurring hook's worker died
}
EXPECTED_WHEN_EXPORTER_GONE = {"ActionSchedulerExporterDown", "ActionSchedulerMetricsAbsent"}


class Queue:
    """A producer and a healthy worker keeping one site's queue moving in a thread."""

    def __init__(
        self,
        server: Server,
        database: str,
        prefix: str,
        outcome: Callable[[str], str | None] | None = None,
        via: str = "WP CLI",
    ) -> None:
        self.store = ActionSchedulerStore(server.connect(database), prefix)
        self.outcome = outcome
        self.via = via
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for index in range(3):
                self.store.create(
                    "woocommerce_deliver_webhook_async", group="webhooks", args=[index]
                )
                if self.outcome:
                    self.store.create("mailchimp_sync_order", group="mailchimp", args=[index])
            self.store.run_batch(10, self.outcome, via=self.via)
            self.stop.wait(0.3)

    def close(self) -> None:
        if self.stop.is_set():
            return
        self.stop.set()
        self.thread.join()
        self.store.connection.close()


@pytest.fixture
def gone_server() -> Iterator[Server]:
    with temporary(start_private) as server:
        yield server


def alert_keys(alerts: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(a["labels"]["alertname"], a["labels"].get("site", "")) for a in alerts}


def test_each_failure_raises_its_alert_through_alertmanager(
    end_to_end: EndToEnd, gone_server: Server
) -> None:
    prefixes = ("wp_", "st_", "fl_", "kw_", "cl_", "wr_", "rc_")
    stores = {prefix: end_to_end.store(prefix) for prefix in prefixes}
    with gone_server.connect().cursor() as cursor:
        cursor.execute("CREATE DATABASE gone")
    ActionSchedulerStore(gone_server.connect("gone")).create_tables()

    sites = (
        end_to_end.site(name="healthy", table_prefix="wp_", dedicated_workers=True),
        end_to_end.site(
            name="stalled",
            table_prefix="st_",
            alerts=AlertThresholds(oldest_due_warning=5, oldest_due_critical=15),
        ),
        end_to_end.site(name="failing", table_prefix="fl_"),
        end_to_end.site(name="killed", table_prefix="kw_", timeout_period=5),
        end_to_end.site(name="atlimit", table_prefix="cl_", concurrent_batches_limit=1),
        # web requests run the queue of a site with dedicated workers
        end_to_end.site(name="webrun", table_prefix="wr_", dedicated_workers=True),
        end_to_end.site(name="recurring", table_prefix="rc_", heavy_interval=2.0),
        end_to_end.site(
            name="gone",
            host=gone_server.host,
            port=gone_server.port,
            database="gone",
            query_timeout=1.0,
        ),
    )
    exporter = end_to_end.exporter(*sites)
    queues: list[Queue] = []
    with (
        end_to_end.alerting(exporter) as (receiver, prometheus),
        contextlib.ExitStack() as cleanup,
    ):
        cleanup.callback(close_all, queues)
        prometheus.wait_for('actionscheduler_up{site="killed"} == 1')
        # killed: a worker SIGKILLed mid-batch, its import still "in progress"; before the
        # site's runner starts, which would otherwise claim the imports first
        for index in range(3):
            stores["kw_"].create("wc_admin_import_orders", group="imports", args=[index])
        killed = stores["kw_"].kill_worker_mid_batch(batch_size=3, finished=0)
        assert len(killed.action_ids) == 3, killed
        queues.extend(
            [
                Queue(end_to_end.mariadb, end_to_end.database, "wp_"),
                # No dedicated workers: quiet.
                Queue(end_to_end.mariadb, end_to_end.database, "kw_", via="WP Cron"),
                Queue(end_to_end.mariadb, end_to_end.database, "wr_", via="WP Cron"),
                Queue(
                    end_to_end.mariadb,
                    end_to_end.database,
                    "fl_",
                    outcome=lambda hook: (
                        "Supplier API unreachable" if hook == "mailchimp_sync_order" else None
                    ),
                ),
            ]
        )
        # stalled: due actions that nobody runs, already half a minute late
        with stores["st_"].seconds_ago(30):
            for index in range(20):
                stores["st_"].create("woocommerce_scheduled_subscription_payment", args=[index])
        # failing: also an action whose hook nothing handles any more
        renamed = stores["fl_"].create("renamed_after_release")
        claim = stores["fl_"].stake_claim(100)
        if renamed in claim.action_ids:
            stores["fl_"].start(renamed)
            stores["fl_"].fail_without_callback(renamed, "renamed_after_release")
        stores["fl_"].release_claim(claim.claim_id)
        # failing: an import that ends in a PHP fatal error, which kills its runner
        assert wait_until(lambda: crash_one(stores["fl_"]), 10)
        # atlimit: the only allowed batch is held, more work waits
        stores["cl_"].create("woocommerce_deliver_webhook_async")
        stores["cl_"].stake_claim(1)
        for index in range(5):
            stores["cl_"].create("woocommerce_deliver_webhook_async", args=[index])
        # recurring: hooks Action Scheduler stopped, one unscheduled on purpose, and one
        # unscheduled after three failures whose canceled row the cleaner purged (PURGED)
        write_history(stores["rc_"])
        # healthy: a recurring hook that failed once and was then unscheduled on purpose
        feed = stores["wp_"].create(
            FEED,
            schedule=schedules.INTERVAL,
            recurrence=600,
            scheduled=stores["wp_"].now() + dt.timedelta(seconds=60),
        )  # not due yet: only this test runs it
        assert stores["wp_"].run_recurring(feed, "Feed service down") is not None
        assert stores["wp_"].unschedule_all(FEED) == 1
        # gone: its database stops
        gone_server.stop()

        # The killed worker's action is failed by a later batch's cleaner, once it has been
        # in progress for 15 s (the failure period, shortened).
        assert wait_until(lambda: stores["kw_"].cleaner_mark_failed(failure_period=15) == 1, 60)
        stores["kw_"].cleaner_reset(timeout=5)

        wait_until(lambda: alert_keys(receiver.received()) >= EXPECTED_WITH_SITES, WAIT)
        received = receiver.received()
        assert alert_keys(received) == EXPECTED_WITH_SITES
        for alert in received:
            labels, annotations = alert["labels"], alert["annotations"]
            assert labels["severity"] in {"warning", "critical"}
            assert labels["site"] in annotations["description"]
            assert annotations["summary"]
            assert annotations["runbook_url"].endswith(".md")
            assert labels["job"] == "actionscheduler" and labels["instance"]
        failing = [
            a for a in received if a["labels"]["alertname"] == "ActionSchedulerHookFailureRatio"
        ]
        assert {a["labels"]["hook"] for a in failing} == {"mailchimp_sync_order"}
        stopped = [
            a["labels"]["hook"]
            for a in received
            if a["labels"]["alertname"] == "ActionSchedulerRecurringActionStopped"
        ]
        wait_until(lambda: len(stopped_alerts(receiver)) == 4, WAIT)
        assert stopped_alerts(receiver) == {NIGHTLY, REPORT, STOCK, BATCH}, stopped
        assert PURGED not in stopped_alerts(receiver)  # (the 2b3dd16 exporter raised it)
        web = [a for a in received if a["labels"]["alertname"].endswith("ByWebRequests")]
        assert {a["labels"]["runner"] for a in web} == {"wp_cron"}
        assert not [a for a in received if a["labels"]["site"] == "healthy"]

        # Losing the exporter itself is noticed.
        close_all(queues)
        exporter.stop()
        wait_until(lambda: gone_names(receiver) >= EXPECTED_WHEN_EXPORTER_GONE, 60)
        assert gone_names(receiver) >= EXPECTED_WHEN_EXPORTER_GONE


def crash_one(store: ActionSchedulerStore) -> bool:
    """A runner claims an action and dies of a PHP fatal error in it; False when the
    site's healthy worker claimed the action first."""
    crashing = store.create("import_products", group="imports")
    claim = store.stake_claim(100)
    if crashing not in claim.action_ids:
        store.release_claim(claim.claim_id)
        return False
    store.start(crashing)
    store.fatal(crashing, claim.claim_id)
    return True


def stopped_alerts(receiver: WebhookReceiver) -> set[str]:
    return {
        a["labels"]["hook"]
        for a in receiver.received()
        if a["labels"]["alertname"] == "ActionSchedulerRecurringActionStopped"
    }


def close_all(queues: list[Queue]) -> None:
    for queue in queues:
        queue.close()


def gone_names(receiver: WebhookReceiver) -> set[str]:
    return {name for name, _ in alert_keys(receiver.received())}


def test_a_healthy_run_of_the_same_length_fires_nothing(end_to_end: EndToEnd) -> None:
    end_to_end.store("wp_")
    end_to_end.store("wp_2_")
    exporter = end_to_end.exporter(
        end_to_end.site(name="shop", table_prefix="wp_", concurrent_batches_limit=2),
        end_to_end.site(name="blog", table_prefix="wp_2_"),
    )
    with end_to_end.alerting(exporter) as (receiver, prometheus):
        prometheus.wait_for('actionscheduler_up{site="blog"} == 1')
        queues = [
            Queue(end_to_end.mariadb, end_to_end.database, "wp_"),
            Queue(end_to_end.mariadb, end_to_end.database, "wp_2_"),
        ]
        try:
            # As long as the failure run: until the rules have been evaluated on the moving
            # queue for HEALTHY_RUN seconds, however slowly this machine goes.
            evaluated = (
                f"count_over_time(site:actionscheduler_actions_completed:rate5m[{HEALTHY_RUN:.0f}s])"
                f" >= {HEALTHY_RUN * 0.8:.0f}"
            )
            prometheus.wait_for(evaluated, timeout=4 * HEALTHY_RUN)
            # the queue moved and Prometheus recorded it
            assert prometheus.query("site:actionscheduler_actions_completed:rate5m > 0")
        finally:
            close_all(queues)
        assert receiver.received() == []
