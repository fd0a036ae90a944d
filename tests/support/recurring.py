"""Who runs the queue, and recurring jobs Action Scheduler stopped: histories written as
Action Scheduler writes them (testbed.store), with what they must show.

`write_history` writes runs by every runner Action Scheduler has and by one it does not
know, recurring hooks that fail until Action Scheduler stops rescheduling them (an
interval one and a cron one), one whose worker died mid-run, one whose next instance
could not be scheduled, one unscheduled on purpose after a failure, and one unscheduled
after three failures whose canceled occurrence the cleaner purged (no row is left after
its last failure). `stopped_hooks` is the ground truth of the gauge, computed from every
row of the actions and logs tables in Python.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from testbed import schedules
from testbed.store import ActionSchedulerStore

# Runs per runner context, as logged; the last one is a plugin's own.
RUNS_BY_CONTEXT = {
    "WP CLI": 4,
    "WP Cron": 3,
    "Async Request": 2,
    "Admin List Table": 1,
    "Queue Worker Plus": 2,
}
NIGHTLY = "shop_nightly_supplier_sync"  # interval, fails until stopped
REPORT = "shop_daily_sales_report"  # cron, fails until stopped (threshold 3)
STOCK = "shop_stock_sync"  # interval, its worker killed mid-run
BATCH = "shop_subscription_batch"  # interval, completes, its next instance fails
FEED = "shop_feed_export"  # interval, fails once, then unscheduled on purpose
PURGED = "shop_price_feed"  # interval, fails 3 times, unscheduled, its canceled row purged
ERROR = "Supplier API unreachable"


@dataclass
class Expected:
    """What the history adds to the counters."""

    runs: Counter[str] = field(default_factory=Counter)  # by runner label
    stopped: Counter[tuple[str, str]] = field(default_factory=Counter)  # (hook, reason)


def _fail_until_stopped(
    store: ActionSchedulerStore, hook: str, kind: str, recurrence: int | str, threshold: int
) -> int:
    """Runs of a recurring hook that always fails, each when it is due, until Action
    Scheduler stops rescheduling it; returns how many ran."""
    step = 60
    start = 40 * step
    with store.seconds_ago(start):
        action: int | None = store.create(
            hook, schedule=kind, recurrence=recurrence, group="sync", scheduled=store.now()
        )
    runs = 0
    while action is not None:
        assert runs < 30, "never stopped"
        with store.seconds_ago(start - step * runs):
            # the next occurrence is due one step later: when the next run happens
            store._execute(
                f"UPDATE {store.actions} SET scheduled_date_gmt = %s WHERE action_id = %s",
                (store.now(), action),
            )
            action = store.run_recurring(action, ERROR, threshold=threshold)
        runs += 1
    return runs


def write_history(store: ActionSchedulerStore) -> Expected:
    """Written in one transaction: an exporter sees the whole history in one scrape, so
    no alert takes its failures, written at once, for a rate. And at one frozen second:
    Action Scheduler's consistently-failing check counts the hook's actions scheduled
    strictly before now, so a clock that ticks between scheduling a run and checking it
    (a loaded machine) would stop a hook one run earlier and change the history."""
    with store.transaction(), store.frozen():
        return _write_history(store)


def _write_history(store: ActionSchedulerStore) -> Expected:
    expected = Expected()
    for context, count in RUNS_BY_CONTEXT.items():
        label = {
            "WP CLI": "wp_cli",
            "WP Cron": "wp_cron",
            "Async Request": "async_request",
            "Admin List Table": "admin_list_table",
        }.get(context, "other")
        for index in range(count):
            action = store.create("woocommerce_deliver_webhook_async", args=[context, index])
            store.run_action(action, via=context)
        expected.runs[label] += count

    for hook, kind, recurrence, threshold in (
        (NIGHTLY, schedules.INTERVAL, 60, 5),
        (REPORT, schedules.CRON, "0 3 * * *", 3),
    ):
        expected.runs["wp_cli"] += _fail_until_stopped(store, hook, kind, recurrence, threshold)
        expected.stopped[(hook, "consistently_failing")] += 1

    # A worker killed mid-run: the cleaner fails the action, nothing reschedules it.
    with store.seconds_ago(900):
        stock = store.create(STOCK, schedule=schedules.INTERVAL, recurrence=300)
        store.start(stock)
    expected.runs["wp_cli"] += 1
    assert store.cleaner_mark_failed() == 1

    batch = store.create(BATCH, schedule=schedules.INTERVAL, recurrence=3600)
    store.run_recurring(batch, next_instance_error="Invalid action - must be a recurring action.")
    expected.runs["wp_cli"] += 1
    expected.stopped[(BATCH, "next_instance_failed")] += 1

    expected.runs["wp_cli"] += _fail_then_unschedule(store)  # before FEED: purge() takes all

    with store.seconds_ago(120):
        feed = store.create(FEED, schedule=schedules.INTERVAL, recurrence=600)
        assert store.run_recurring(feed, ERROR) is not None  # one failure: rescheduled
    expected.runs["wp_cli"] += 1
    assert store.unschedule_all(FEED) == 1  # the plugin stops it on purpose
    return expected


def _fail_then_unschedule(store: ActionSchedulerStore) -> int:
    """Three failures, each rescheduled (below the threshold of 5), then the plugin
    unschedules the job and the cleaner's next batch purges the canceled occurrence, which
    never ran (its last attempt is the zero date): the hook's latest row is a failure."""
    with store.seconds_ago(600):
        action: int | None = store.create(PURGED, schedule=schedules.INTERVAL, recurrence=60)
    for run in range(3):
        assert action is not None
        with store.seconds_ago(600 - 60 * run):
            store._execute(
                f"UPDATE {store.actions} SET scheduled_date_gmt = %s WHERE action_id = %s",
                (store.now(), action),
            )
            action = store.run_recurring(action, ERROR)
    assert action is not None  # rescheduled every time
    assert store.unschedule_all(PURGED) == 1
    assert store.purge() == 1
    return 3


def translated(expected: Expected) -> Expected:
    """The same history on a site in another language: the stop's reason is unknown."""
    stopped: Counter[tuple[str, str]] = Counter()
    for (hook, _), count in expected.stopped.items():
        stopped[(hook, "unknown")] += count
    return Expected(expected.runs, stopped)


# What the gauge knows of Action Scheduler (actionscheduler_exporter/collectors/recurring.py
# says why), written out again here.
THRESHOLD = 5
FAILURE_PERIOD = dt.timedelta(seconds=300)
NOT_RESCHEDULED = (
    "This action appears to be consistently failing.",
    "There was a failure scheduling the next instance",
    "action marked as failed after ",
    "unexpected shutdown: PHP Fatal error",
)


@dataclass(frozen=True)
class Row:
    action_id: int
    hook: str
    status: str
    scheduled: dt.datetime
    schedule: str
    last_attempt: dt.datetime | None


def table_rows(store: ActionSchedulerStore) -> tuple[list[Row], list[tuple[int, str, Any]]]:
    """Every action row, and every log row (action id, message, date), of the store."""
    actions = [
        Row(int(i), str(h), str(st), sc, str(schedule), la if isinstance(la, dt.datetime) else None)
        for i, h, st, sc, schedule, la in store._query(
            "SELECT action_id, hook, status, scheduled_date_gmt, schedule, last_attempt_gmt"
            f" FROM {store.actions}"
        )
    ]
    logs = [
        (int(i), str(m), d)
        for i, m, d in store._query(f"SELECT action_id, message, log_date_gmt FROM {store.logs}")
    ]
    return actions, logs


def stopped_hooks(actions: list[Row], logs: list[tuple[int, str, Any]]) -> set[str]:
    """The gauge's truth from every row: hooks with nothing pending or in progress whose
    latest action is a failed recurring one that Action Scheduler did not reschedule: its
    first THRESHOLD actions all failed, or its log has a row written only then, or its
    failure came a failure period after its start (the cleaner)."""
    by_hook: dict[str, list[Row]] = {}
    for row in actions:
        by_hook.setdefault(row.hook, []).append(row)
    stopped = set()
    for hook, rows in by_hook.items():
        if any(row.status in ("pending", "in-progress") for row in rows):
            continue
        latest = max(rows, key=lambda row: (row.scheduled, row.status == "failed"))
        recurring = any(f'"{name}"' in latest.schedule for name in _RECURRING_CLASSES)
        if latest.status != "failed" or not recurring:
            continue
        # a tie is not "all failed": the collector asks for a later first non-failed row
        first = sorted(rows, key=lambda row: (row.scheduled, row.status == "failed"))
        if len(first) >= THRESHOLD and all(row.status == "failed" for row in first[:THRESHOLD]):
            stopped.add(hook)
            continue
        failed = [row for row in rows if row.status == "failed"]
        newest = max(failed, key=lambda row: (row.scheduled, row.action_id))
        for action_id, message, logged in logs:
            if action_id != newest.action_id:
                continue
            late = (
                newest.last_attempt is not None and logged - newest.last_attempt >= FAILURE_PERIOD
            )
            if message.startswith(NOT_RESCHEDULED) or late:
                stopped.add(hook)
    return stopped


_RECURRING_CLASSES = ("ActionScheduler_IntervalSchedule", "ActionScheduler_CronSchedule")
