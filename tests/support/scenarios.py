"""Queue histories written the way Action Scheduler writes them (testbed.store), and the
check of a scrape against independent ground truth (tests/support/truth.py): the scenarios the
tests share."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from actionscheduler_exporter.db.schema import STATUSES
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from testbed import as4, schedules
from testbed.schema import ZERO_DATE
from testbed.store import ActionSchedulerStore
from tests.support.truth import Truth

# Hook names that a careless exposition would break.
NASTY_HOOKS = [
    'hook "with" quotes',
    "hook\nwith\nnewlines",
    "back\\slash\\hook",
    "crochet_café_日本語_🚀",
    "h" * 191,
    'a{b="c"}',
]


AGE_SLACK = 3.0  # seconds that may pass between the scrape and the ground truth


@dataclass(frozen=True)
class TruthRow:
    """One sample of a scrape and the truth it must equal (within `slack`)."""

    metric: catalog.MetricDef
    labels: dict[str, str]
    truth: Callable[[Truth], float]
    slack: float = 0.0


# Every family with a value of its own, against its truth: one row each. (The families
# keyed by status, group or hook are compared as a whole in `assert_matches`.)
FAMILIES: tuple[TruthRow, ...] = (
    TruthRow(catalog.DUE_ACTIONS, {"claim": "unclaimed"}, lambda t: t.due_unclaimed),
    TruthRow(catalog.DUE_ACTIONS, {"claim": "claimed"}, lambda t: t.due_claimed),
    TruthRow(catalog.UNDATED_PENDING, {"date": "zero"}, lambda t: t.zero_dated),
    TruthRow(catalog.UNDATED_PENDING, {"date": "null"}, lambda t: t.null_dated),
    TruthRow(catalog.OLDEST_DUE_AGE, {}, lambda t: t.oldest_due_age, AGE_SLACK),
    TruthRow(catalog.IN_PROGRESS, {}, lambda t: t.in_progress),
    TruthRow(catalog.OLDEST_IN_PROGRESS_AGE, {}, lambda t: t.oldest_in_progress_age, AGE_SLACK),
    TruthRow(catalog.ACTIVE_CLAIMS, {}, lambda t: t.active_claims),
    TruthRow(catalog.CLAIM_ROWS, {}, lambda t: t.claim_rows),
    TruthRow(catalog.OLDEST_CLAIM_AGE, {}, lambda t: t.oldest_claim_age, AGE_SLACK),
    TruthRow(catalog.ORPHANED_CLAIMS, {}, lambda t: t.orphaned_claims),
    TruthRow(catalog.STALE_CLAIMED_PENDING, {}, lambda t: t.stale_claimed),
    TruthRow(catalog.OLDEST_FINISHED_AGE, {}, lambda t: t.oldest_finished_age, AGE_SLACK),
    TruthRow(catalog.DUE_UNSPLIT, {}, lambda t: 0),
)


def assert_matches(result: SiteResult, truth: Truth) -> None:
    assert result.up, result.problems

    def value(metric: catalog.MetricDef, **labels: str) -> float:
        found = result.value(metric.name, **labels)
        assert found is not None, f"{metric.name}{labels} missing"
        return found

    for status in STATUSES:
        assert value(catalog.ACTIONS, status=status) == truth.statuses[status], status
    grouped = {
        (dict(s.labels)["status"], dict(s.labels)["group"]): s.value
        for s in result.samples
        if s.metric is catalog.ACTIONS_BY_GROUP
    }
    assert grouped == {key: count for key, count in truth.by_status_group.items() if count}
    for row in FAMILIES:
        found = value(row.metric, **row.labels)
        assert found == pytest.approx(row.truth(truth), abs=row.slack), (
            row.metric.name,
            row.labels,
        )
    failed = {
        dict(s.labels)["hook"]: s.value
        for s in result.samples
        if s.metric is catalog.FAILED_BY_HOOK
    }
    assert failed == dict(truth.failed_by_hook)
    split = {
        metric: {dict(s.labels)[label]: s.value for s in result.samples if s.metric is metric}
        for metric, label in (
            (catalog.DUE_BY_GROUP, "group"),
            (catalog.DUE_BY_HOOK, "hook"),
            (catalog.OLDEST_DUE_AGE_BY_GROUP, "group"),
            (catalog.OLDEST_DUE_AGE_BY_HOOK, "hook"),
        )
    }
    assert split[catalog.DUE_BY_GROUP] == top_20(truth.due_by_group)
    assert split[catalog.DUE_BY_HOOK] == top_20(truth.due_by_hook)
    assert split[catalog.OLDEST_DUE_AGE_BY_GROUP].keys() == top_20(truth.due_by_group).keys()
    for group, age in split[catalog.OLDEST_DUE_AGE_BY_GROUP].items():
        if group != catalog.OTHER:
            expected = truth.oldest_due_age_by_group[group]
            assert age == pytest.approx(expected, abs=AGE_SLACK), group
    assert split[catalog.OLDEST_DUE_AGE_BY_HOOK].keys() == top_20(truth.due_by_hook).keys()
    for hook, age in split[catalog.OLDEST_DUE_AGE_BY_HOOK].items():
        if hook != catalog.OTHER:
            expected = truth.oldest_due_age_by_hook[hook]
            assert age == pytest.approx(expected, abs=AGE_SLACK), hook
    collectors = ("due", "due_split", "in_progress", "claims", "status", "failures", "retention")
    for collector in (*collectors, "tables"):
        assert value(catalog.COLLECTOR_SUCCESS, collector=collector) == 1.0, collector


def top_20(counts: Counter[str]) -> dict[str, float]:
    """The default top-N folding, written out independently of the exporter's."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    folded: dict[str, float] = {value: count for value, count in ranked[:20]}
    rest = sum(count for _, count in ranked[20:])
    if len(ranked) > 20:
        folded["other"] = rest
    return folded


def healthy_flow(store: ActionSchedulerStore) -> None:
    for index in range(60):
        store.create(
            "woocommerce_deliver_webhook_async", group="woocommerce-webhooks", args=[index]
        )
    for index in range(20):
        store.create("woocommerce_scheduled_subscription_payment", group="wcs", args=[index])
    store.run_batch(25)
    store.run_batch(25)
    store.run_batch(25)


def backlog(store: ActionSchedulerStore) -> None:
    with store.seconds_ago(3600):
        for index in range(150):
            store.create("wc_admin_import_orders", group="wc-admin-data", args=[index])
    with store.seconds_ago(600):
        store.run_batch(10)
    for index in range(40):
        store.create(
            "woocommerce_deliver_webhook_async", group="woocommerce-webhooks", args=[index]
        )
    # A batch that is running right now: claimed rows that are not stale.
    claim = store.stake_claim(5)
    store.start(claim.action_ids[0])


def failing_hooks(store: ActionSchedulerStore) -> None:
    for index in range(30):
        store.create("wc_payment_gateway_sync", group="payments", args=[index])
        store.create("mailchimp_sync_order", group="mailchimp", args=[index])

    def outcome(hook: str) -> str | None:
        return "Supplier API unreachable" if hook == "mailchimp_sync_order" else None

    store.run_batch(40, outcome)
    no_callback = store.create("renamed_hook_after_release")
    claim = store.stake_claim(50)
    for action_id in claim.action_ids:
        if action_id == no_callback:
            store.start(action_id)
            store.fail_without_callback(action_id, "renamed_hook_after_release")
        else:
            store.run_action(action_id, outcome)
    store.release_claim(claim.claim_id)


def killed_worker(store: ActionSchedulerStore) -> None:
    """A worker SIGKILLed 10 minutes ago, mid-batch; another died before claiming."""
    with store.seconds_ago(900):
        for index in range(30):
            store.create(
                "woocommerce_deliver_webhook_async", group="woocommerce-webhooks", args=[index]
            )
    with store.seconds_ago(600):
        store.kill_worker_mid_batch(batch_size=10, finished=4)
        # A claim row whose claiming UPDATE never ran, or whose actions the cleaner failed.
        store.stake_claim(0)
    with store.seconds_ago(30):
        store.run_batch(5)


def killed_worker_after_cleaner(store: ActionSchedulerStore) -> None:
    killed_worker(store)
    store.cleaner_reset()
    store.cleaner_mark_failed()


def only_future(store: ActionSchedulerStore) -> None:
    later = store.now() + dt.timedelta(hours=2)
    for index in range(25):
        store.create("woocommerce_cleanup_draft_orders", scheduled=later, args=[index])
    store.run_batch(25)  # claims nothing: nothing is due


def zero_dates(store: ActionSchedulerStore) -> None:
    with store.seconds_ago(7200):
        for index in range(3):
            store.create("wc_admin_async", scheduled=ZERO_DATE, args=[index])
    with store.seconds_ago(60):
        store.create("woocommerce_deliver_webhook_async")


def finished_and_canceled(store: ActionSchedulerStore) -> None:
    with store.seconds_ago(40 * 86400):
        done = store.create("old_import")
        store.run_action(done)
    canceled = store.create("woocommerce_cancel_unpaid_orders")
    store.cancel(canceled)
    store.run_batch(5)


# -- Action Scheduler 4.x (testbed.as4, docs/action-scheduler-4.md) -----------------------


def as4_daily_cleanup(store: ActionSchedulerStore) -> None:
    """A 4.x store at its daily cleanup: failed actions older than their three months
    purged with their logs, complete and canceled ones past 31 days in runs of at least
    250 with a continuation for the rest, newer failures kept, the task's next occurrence
    pending for tomorrow 3 am; runs by the persistent worker."""
    with store.seconds_ago(100 * 86400):
        for index in range(30):
            store.create("mailchimp_sync_order", group="mailchimp", args=[index])
        store.create("woocommerce_deliver_webhook_async", group="woocommerce-webhooks")
        store.run_batch(40, fail_mailchimp)
    with store.seconds_ago(40 * 86400):
        for index in range(520):
            store.create(
                "woocommerce_deliver_webhook_async", group="woocommerce-webhooks", args=[index]
            )
        for index in range(5):
            store.cancel(store.create("woocommerce_cancel_unpaid_orders", args=[index]))
        for _ in range(21):
            store.run_batch(25)
    with store.seconds_ago(10 * 86400):
        for index in range(8):
            store.create("mailchimp_sync_order", group="mailchimp", args=[100 + index])
        store.run_batch(10, fail_mailchimp)
    with store.seconds_ago(2 * 86400):
        as4.schedule_cleanup(store)  # due yesterday at 3 am
    for _ in range(20):
        store.create("woocommerce_deliver_webhook_async", group="woocommerce-webhooks")
    # The task (priority 0) first: 30 failed, 5 canceled and 490 complete purged (the
    # canceled status's unused budget goes to the complete one), and a continuation.
    as4.run_batch(store, 5)
    as4.run_batch(store, 25)  # its continuation (due at once, priority 0): the last 31


def as4_corrupted_and_worker(store: ActionSchedulerStore) -> None:
    """A 4.x store whose worker (`wp action-scheduler work`) meets actions it cannot read:
    a single and a recurring one canceled, the recurring one not repeated; the rest run,
    one hook failing."""
    corrupt = [
        store.create("wc_admin_import_orders", group="wc-admin-data", args=[1]),
        store.create(
            "woocommerce_cleanup_sessions", group="woocommerce", schedule=schedules.INTERVAL
        ),
    ]
    for index in range(10):
        store.create("wc_payment_gateway_sync", group="payments", args=[index])
        store.create("mailchimp_sync_order", group="mailchimp", args=[index])
    store.create("woocommerce_scheduled_sales", group="woocommerce", schedule=schedules.INTERVAL)
    as4.run_batch(store, 25, fail_mailchimp, corrupted=corrupt)


def fail_mailchimp(hook: str) -> str | None:
    return "Supplier API unreachable" if hook == "mailchimp_sync_order" else None
