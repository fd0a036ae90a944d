"""Who runs the queue, and recurring jobs Action Scheduler stopped: histories written as
Action Scheduler writes them (testbed.store), with what they must show.

`write_history` writes runs by every runner Action Scheduler has and by one it does not
know, recurring hooks that fail until Action Scheduler stops rescheduling them (an
interval one and a cron one), one whose worker died mid-run, one whose next instance
could not be scheduled, and one unscheduled on purpose after a failure. `stopped_hooks`
is the ground truth of the gauge, computed from every row of the table in Python.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field

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
    no alert takes its failures, written at once, for a rate."""
    with store.transaction():
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

    with store.seconds_ago(120):
        feed = store.create(FEED, schedule=schedules.INTERVAL, recurrence=600)
        assert store.run_recurring(feed, ERROR) is not None  # one failure: rescheduled
    expected.runs["wp_cli"] += 1
    assert store.unschedule_all(FEED) == 1  # the plugin stops it on purpose
    return expected


def translated(expected: Expected) -> Expected:
    """The same history on a site in another language: the stop's reason is unknown."""
    stopped: Counter[tuple[str, str]] = Counter()
    for (hook, _), count in expected.stopped.items():
        stopped[(hook, "unknown")] += count
    return Expected(expected.runs, stopped)


def stopped_hooks(rows: list[tuple[str, str, dt.datetime, str]]) -> set[str]:
    """The gauge's truth from every (hook, status, scheduled date, schedule) row: hooks
    whose latest action is a failed recurring one and that have nothing pending or in
    progress."""
    by_hook: dict[str, list[tuple[dt.datetime, str, str]]] = {}
    for hook, status, scheduled, schedule in rows:
        by_hook.setdefault(hook, []).append((scheduled, status, schedule))
    stopped = set()
    for hook, actions in by_hook.items():
        if any(status in ("pending", "in-progress") for _, status, _ in actions):
            continue
        _, status, schedule = max(actions, key=lambda action: action[0])
        recurring = any(f'"{name}"' in schedule for name in _RECURRING_CLASSES)
        if status == "failed" and recurring:
            stopped.add(hook)
    return stopped


_RECURRING_CLASSES = ("ActionScheduler_IntervalSchedule", "ActionScheduler_CronSchedule")
