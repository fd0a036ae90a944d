"""Every queue metric against independent ground truth, in the states a store goes through.

Each history is written the way Action Scheduler writes it (testbed.store); the expected
values come from tests/support/truth.py, which reads the tables row by row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from testbed import as4, schema
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.support.scenarios import (
    AGE_SLACK,
    as4_corrupted_and_worker,
    as4_daily_cleanup,
    assert_matches,
    backlog,
    failing_hooks,
    finished_and_canceled,
    healthy_flow,
    killed_worker,
    killed_worker_after_cleaner,
    only_future,
    zero_dates,
)
from tests.support.truth import compute

HISTORIES: dict[str, Callable[[ActionSchedulerStore], None]] = {
    "empty": lambda store: None,
    "healthy_flow": healthy_flow,
    "backlog": backlog,
    "failing_hooks": failing_hooks,
    "killed_worker": killed_worker,
    "killed_worker_after_cleaner": killed_worker_after_cleaner,
    "only_future": only_future,
    "zero_dates": zero_dates,
    "finished_and_canceled": finished_and_canceled,
    # Action Scheduler 4.x
    "as4_daily_cleanup": as4_daily_cleanup,
    "as4_corrupted_and_worker": as4_corrupted_and_worker,
}


@pytest.mark.parametrize("history", HISTORIES)
def test_metrics_match_ground_truth(
    history: str, store: ActionSchedulerStore, scrape: Scrape
) -> None:
    HISTORIES[history](store)
    (result,) = scrape()
    assert_matches(result, compute(store.connection))


def test_killed_worker_is_visible_before_the_cleaner_runs(
    store: ActionSchedulerStore, scrape: Scrape
) -> None:
    killed_worker(store)
    (result,) = scrape()
    assert result.value("actionscheduler_in_progress_actions") == 1
    assert (result.value("actionscheduler_oldest_in_progress_action_age_seconds") or 0) >= 600
    # The killed batch's claim is still active; the empty claim row is the orphan.
    assert result.value("actionscheduler_active_claims") == 1
    assert result.value("actionscheduler_orphaned_claims") == 1
    assert result.value("actionscheduler_stale_claimed_pending_actions") == 5

    store.cleaner_reset()
    store.cleaner_mark_failed()
    (after,) = scrape()
    assert after.value("actionscheduler_in_progress_actions") == 0
    assert after.value("actionscheduler_stale_claimed_pending_actions") == 0
    # The failed action keeps its claim_id, but only open actions make a claim active,
    # so now both rows of the claims table are orphans.
    assert after.value("actionscheduler_active_claims") == 0
    assert after.value("actionscheduler_orphaned_claims") == 2


def test_a_fresh_claim_row_is_not_an_orphan(store: ActionSchedulerStore, scrape: Scrape) -> None:
    store.stake_claim(25)  # nothing due: a healthy runner's claim row, for a moment
    (result,) = scrape()
    assert result.value("actionscheduler_claim_rows") == 1
    assert result.value("actionscheduler_orphaned_claims") == 0


def test_zero_dated_actions_get_their_age_from_the_creation_log(
    store: ActionSchedulerStore, scrape: Scrape
) -> None:
    zero_dates(store)
    (result,) = scrape()
    assert result.value("actionscheduler_undated_pending_actions", date="zero") == 3
    assert result.value("actionscheduler_oldest_due_action_age_seconds") == pytest.approx(
        7200, abs=AGE_SLACK
    )


def test_concurrent_batches_limit_is_reported_when_configured(
    store: ActionSchedulerStore, scrape: Scrape, site: Callable[..., object]
) -> None:
    (result,) = scrape(site(concurrent_batches_limit=3))
    assert result.value("actionscheduler_concurrent_batches_limit") == 3
    (unset,) = scrape(site())
    assert unset.value("actionscheduler_concurrent_batches_limit") is None


def test_two_sites_with_different_prefixes_in_one_database(
    store_factory: Callable[[str], ActionSchedulerStore],
    scrape: Scrape,
    site: Callable[..., object],
) -> None:
    main, second = store_factory("wp_"), store_factory("wp_2_")
    healthy_flow(main)
    failing_hooks(second)
    results = {
        r.label: r
        for r in scrape(
            site(name="main", table_prefix="wp_"), site(name="blog2", table_prefix="wp_2_")
        )
    }
    assert_matches(results["main"], compute(main.connection, "wp_"))
    assert_matches(results["blog2"], compute(second.connection, "wp_2_"))


def test_auto_prefix_finds_every_site_of_a_network(
    store_factory: Callable[[str], ActionSchedulerStore],
    scrape: Scrape,
    site: Callable[..., object],
) -> None:
    stores = {prefix: store_factory(prefix) for prefix in ("wp_", "wp_2_", "wp_17_")}
    backlog(stores["wp_2_"])
    results = {r.label: r for r in scrape(site(name="network", table_prefix="auto"))}
    assert set(results) == {"network:wp_", "network:wp_2_", "network:wp_17_"}
    for prefix, store in stores.items():
        assert_matches(results[f"network:{prefix}"], compute(store.connection, prefix))


@pytest.mark.parametrize(
    "history", ["healthy_flow", "backlog", "failing_hooks", "as4_daily_cleanup"]
)
def test_a_store_created_before_3_7_gives_the_same_numbers(
    history: str, store: ActionSchedulerStore, scrape: Scrape
) -> None:
    """Issue 38: a table created by Action Scheduler 3.6 and never given 3.7's indexes
    (3.7 kept the schema version, so nothing upgraded it): every number is still right;
    only the statements that relied on the composite indexes read more rows."""
    for statement in schema.before_3_7(store.prefix):
        store._execute(statement)
    HISTORIES[history](store)
    (result,) = scrape()
    assert_matches(result, compute(store.connection))


def test_the_4x_cleanup_history_is_what_4x_leaves(
    store: ActionSchedulerStore, scrape: Scrape
) -> None:
    """The scenario itself: failed actions past three months purged with their logs, the
    newer ones kept; the daily task's next occurrence pending; no continuation left."""
    as4_daily_cleanup(store)
    expected = compute(store.connection)
    assert dict(expected.failed_by_hook) == {"mailchimp_sync_order": 8}
    with store.connection.cursor() as cursor:
        cursor.execute(
            f"SELECT hook, status, COUNT(*) FROM {store.actions}"
            " WHERE hook LIKE 'action_scheduler_%' GROUP BY 1, 2"
        )
        housekeeping = {(hook, status): count for hook, status, count in cursor.fetchall()}
        cursor.execute(
            f"SELECT COUNT(*) FROM {store.logs} l LEFT JOIN {store.actions} a"
            " ON a.action_id = l.action_id WHERE a.action_id IS NULL"
        )
        (orphaned_logs,) = cursor.fetchone()
    assert housekeeping == {
        (as4.CLEANUP_HOOK, "complete"): 1,
        (as4.CLEANUP_HOOK, "pending"): 1,
        (as4.CONTINUE_HOOK, "complete"): 1,
    }
    assert orphaned_logs == 0
    (result,) = scrape()
    assert_matches(result, expected)


def test_a_stopped_4x_cleanup_task_shows_as_a_stopped_recurring_hook(
    store: ActionSchedulerStore, scrape: Scrape
) -> None:
    """The daily cleanup is a recurring action like any other: killed by a host's time
    limit five days running, it is not rescheduled, and the table says so."""
    task: int | None = as4.schedule_cleanup(store)
    for days in range(5, 0, -1):
        assert task is not None
        with store.seconds_ago(days * 86400 - 3600):
            store._execute(
                f"UPDATE {store.actions} SET scheduled_date_gmt = %s WHERE action_id = %s",
                (store.now() - dt.timedelta(minutes=1), task),  # due, run a minute late
            )
            task = store.run_recurring(task, "Maximum execution time of 30 seconds exceeded")
    assert task is None  # consistently failing: no next occurrence
    (result,) = scrape()
    assert result.value("actionscheduler_recurring_hooks_stopped", hook=as4.CLEANUP_HOOK) == 1
