"""What Action Scheduler 4.x writes beyond 3.x, statement for statement, on a testbed store.

The daily cleanup task (ActionScheduler_QueueCleaner::register_recurring_actions(),
delete_old_actions(), clean_actions()) with its continuations and the purge of failed
actions after their own retention; the cancellation of an action whose data cannot be
read (ActionScheduler_Abstract_QueueRunner::cancel_corrupted_action()); and the context
the persistent `wp action-scheduler work` worker logs. docs/action-scheduler-4.md gives
the source of each fact.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from testbed import schedules
from testbed.store import ActionSchedulerStore, Claim, Outcome

CLEANUP_HOOK = "action_scheduler_run_actions_cleanup_hook"
CONTINUE_HOOK = "action_scheduler_continue_actions_cleanup_hook"
GROUP = "ActionScheduler"  # the group of Action Scheduler's own actions
DAY = 86400
RETENTION = 31 * DAY  # action_scheduler_retention_period
FAILED_RETENTION = 3 * RETENTION  # action_scheduler_retention_period_for_failed
CLEANUP_BATCH = 20  # action_scheduler_cleanup_batch_size; failed ones: fixed at 20
SCHEDULED_MINIMUM = 250  # the least a run of the daily task deletes per status
WORKER = "WP CLI Worker"  # the context `wp action-scheduler work` passes to run()
_OPEN = "('pending', 'in-progress')"


@dataclass(frozen=True)
class Cleanup:
    deleted: tuple[int, ...]
    continuation: int | None  # a continuation this run scheduled
    next_run: int | None  # the daily task's next occurrence (its run only)


def schedule_cleanup(store: ActionSchedulerStore) -> int:
    """register_recurring_actions(): the daily task, unless one is pending or running;
    unique, priority 0, first due tomorrow at 3 am site time (the testbed's sites are in
    UTC), then every day."""
    existing = _open_of(store, CLEANUP_HOOK)
    if existing:
        return existing[0]
    first = (store.now() + dt.timedelta(days=1)).replace(hour=3, minute=0, second=0)
    return store.create(
        CLEANUP_HOOK,
        group=GROUP,
        scheduled=first,
        priority=0,
        schedule=schedules.INTERVAL,
        recurrence=DAY,
    )


def delete_old_actions(
    store: ActionSchedulerStore,
    *,
    task: str | None = None,
    batch_size: int = CLEANUP_BATCH,
    retention: int = RETENTION,
    failed_retention: int = FAILED_RETENTION,
    clean_failed: bool = True,
    statuses: Sequence[str] = ("complete", "canceled"),
) -> tuple[list[int], int | None]:
    """delete_old_actions(): failed actions past their retention first (20 at a time,
    unless `statuses` purges them already), then `statuses` past the retention. `task`:
    the hook of the cleanup action running it (None: called inline). The deleted ids and
    the continuation scheduled, if any."""
    now = store.now()
    deleted: list[int] = []
    continuation = None
    if clean_failed and "failed" not in statuses:
        ids, scheduled = _clean(
            store, ["failed"], now - dt.timedelta(seconds=failed_retention), 20, task
        )
        deleted += ids
        continuation = continuation or scheduled
    if statuses:
        cutoff = now - dt.timedelta(seconds=retention)
        ids, scheduled = _clean(store, list(statuses), cutoff, batch_size, task)
        deleted += ids
        continuation = continuation or scheduled
    return deleted, continuation


def _clean(
    store: ActionSchedulerStore,
    statuses: list[str],
    cutoff: dt.datetime,
    batch_size: int,
    task: str | None,
) -> tuple[list[int], int | None]:
    """clean_actions(): per status, up to the batch of actions last attempted at or
    before the cutoff, each deleted with its logs. Inside the daily task: at least 250 per
    status, canceled first and complete last, what one status left unused carried to the
    next, and a continuation scheduled when any status filled its budget."""
    scheduled = task is not None
    if scheduled:
        statuses = sorted(
            statuses, key=lambda status: {"canceled": 0, "complete": 2}.get(status, 1)
        )
    batch = max(SCHEDULED_MINIMUM, batch_size) if scheduled else batch_size
    deleted: list[int] = []
    unused = 0
    full = False
    for status in statuses:
        budget = batch + unused
        ids = store._ids(
            f"SELECT action_id FROM {store.actions} WHERE status = %s"
            " AND last_attempt_gmt <= %s LIMIT %s",
            (status, cutoff, budget),
        )
        for action_id in ids:
            store.delete_action(action_id)
        deleted += ids
        unused = budget - len(ids) if scheduled else 0
        full = full or len(ids) == budget
    if not (scheduled and full):
        return deleted, None
    # From the daily task the continuation is unique (none while one is pending or
    # running); from a continuation, one is added unless one is pending already.
    from_run = task == CLEANUP_HOOK
    waiting = _open_of(store, CONTINUE_HOOK) if from_run else _pending_of(store, CONTINUE_HOOK)
    if waiting:
        return deleted, None
    continuation = store.create(CONTINUE_HOOK, group=GROUP, priority=0)
    return deleted, continuation


def run_cleanup(store: ActionSchedulerStore, action_id: int, via: str = "WP Cron") -> Cleanup:
    """process_action() of the daily task or a continuation: started, the deletions,
    complete; the daily task's next occurrence a day after the last one due."""
    hook = store.hook_of(action_id)
    store.start(action_id, via)
    deleted, continuation = delete_old_actions(store, task=hook)
    store.complete(action_id, via)
    next_run = None
    if hook == CLEANUP_HOOK:
        rows = store._query(
            f"SELECT scheduled_date_gmt FROM {store.actions} WHERE action_id = %s", (action_id,)
        )
        due = rows[0][0]
        assert isinstance(due, dt.datetime)
        now = store.now()
        while due <= now:
            due += dt.timedelta(days=1)
        next_run = store.create(
            CLEANUP_HOOK,
            group=GROUP,
            scheduled=due,
            priority=0,
            schedule=schedules.INTERVAL,
            recurrence=DAY,
        )
    return Cleanup(tuple(deleted), continuation, next_run)


def cancel_corrupted(
    store: ActionSchedulerStore, action_id: int, via: str = WORKER, clear_logs: bool = True
) -> None:
    """process_action() of an action whose data cannot be read: its start is logged
    (`action_scheduler_begin_execute`), fetching it fails twice, it is canceled (its
    "action canceled" row), its log rows are cleared (4.0's cleanup of their excess logs;
    `clear_logs=False` for a logger that does not), and the reason is logged. The store's
    log_execution() never ran: attempts and last_attempt_gmt stay as the claim left them."""
    store.log(action_id, store.messages.start(via))
    store.cancel(action_id)
    if clear_logs:
        store.clear_logs(action_id)
    store.log(action_id, store.messages.corrupted)


def run_batch(
    store: ActionSchedulerStore,
    batch_size: int = 25,
    outcome: Outcome | None = None,
    via: str = WORKER,
    corrupted: Sequence[int] = (),
) -> Claim:
    """A 4.x batch: the cleanup actions it claims delete old actions, the `corrupted`
    ones are canceled, the rest run (and the recurring ones are repeated)."""
    claim = store.stake_claim(batch_size)
    for action_id in claim.action_ids:
        hook = store.hook_of(action_id)
        if action_id in corrupted:
            cancel_corrupted(store, action_id, via)
        elif hook in (CLEANUP_HOOK, CONTINUE_HOOK):
            run_cleanup(store, action_id, via)
        elif _recurring(store, action_id):
            store.run_recurring(action_id, outcome(hook) if outcome else None, via)
        else:
            store.run_action(action_id, outcome, via)
    store.release_claim(claim.claim_id)
    return claim


def _recurring(store: ActionSchedulerStore, action_id: int) -> bool:
    rows = store._query(
        f"SELECT LEFT(schedule, 45) FROM {store.actions} WHERE action_id = %s", (action_id,)
    )
    head = str(rows[0][0] or "")
    return "IntervalSchedule" in head or "CronSchedule" in head


def _open_of(store: ActionSchedulerStore, hook: str) -> list[int]:
    return store._ids(
        f"SELECT action_id FROM {store.actions} WHERE hook = %s AND status IN {_OPEN}"
        " ORDER BY action_id",
        (hook,),
    )


def _pending_of(store: ActionSchedulerStore, hook: str) -> list[int]:
    return store._ids(
        f"SELECT action_id FROM {store.actions} WHERE hook = %s AND status = 'pending'",
        (hook,),
    )
