"""Recurring jobs that Action Scheduler stopped: hooks with no next occurrence.

Since 3.5, a recurring action is not rescheduled when it keeps failing, or when
scheduling its next instance throws, and a killed or crashed run of one never reaches the
rescheduling at all. A job is judged stopped by what Action Scheduler does when it stops
one, never by a missing row: the hook has nothing pending or in progress, its latest
action (by scheduled date) is a failed interval or cron action, and either

- Action Scheduler's own consistent-failure rule holds at its default threshold (5): the
  hook's first five actions by scheduled date are all failed (what
  `recurring_action_is_consistently_failing()` asks, in any language), or
- that failed action's log says so: a stop row ("consistently failing", "failure
  scheduling the next instance"), the end of a run that never returned to the runner
  (the cleaner's "marked as failed", the fatal-error monitor's "unexpected shutdown"), or,
  in any language, a failure logged a failure period (300 s) or more after the run
  started: the cleaner's mark (a run that itself lasted that long and then threw was
  rescheduled, but the cleaner of any other batch would have failed it first).

A failed run below the threshold was rescheduled: when its hook has no row after it, the
next occurrence was unscheduled on purpose and its canceled row purged by the cleaner
(one that never ran is purged at the next batch), which is intentional, not a stop.

Heavy tier: the candidates are the hooks with failed actions, from the totals the tier has
already counted; each is then judged with reads of the (hook, status, scheduled date)
index that stop at the first rows of one status, a batch of hooks per statement, and for
the few still undecided, the log rows of their latest failed action.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from actionscheduler_exporter.db.schema import is_recurring, label_value, schedule_head
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.folding import fold
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, DatabaseContext

HOOKS_PER_STATEMENT = 25
# action_scheduler_recurring_action_failure_threshold's default: a site that lowers it is
# still judged by its stop rows (in English) and by the stop counter of the log events.
FAILURE_THRESHOLD = 5
# action_scheduler_failure_period's default: the cleaner fails a run no sooner than this.
FAILURE_PERIOD = dt.timedelta(seconds=300)
# The English rows Action Scheduler writes on a recurring action it does not reschedule.
_NOT_RESCHEDULED = (
    "This action appears to be consistently failing.",
    "There was a failure scheduling the next instance",
    "action marked as failed after ",
    "unexpected shutdown: PHP Fatal error",
)
_MESSAGE_HEAD = max(len(prefix) for prefix in _NOT_RESCHEDULED)


class RecurringCollector(Collector):
    name = "recurring"
    metrics = (catalog.RECURRING_HOOKS_STOPPED,)

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        candidates = sorted(context.action_totals().failed_by_hook)
        stopped: Counter[str] = Counter()
        for start in range(0, len(candidates), HOOKS_PER_STATEMENT):
            batch = candidates[start : start + HOOKS_PER_STATEMENT]
            stopped.update(hook for hook in stopped_hooks(context, batch))
        folded, _ = fold(stopped, context.site.top_hooks)
        for hook, count in sorted(folded.items()):
            yield sample(catalog.RECURRING_HOOKS_STOPPED, count, hook=hook)


def _first(
    actions: str,
    status: str,
    column: str = "scheduled_date_gmt",
    order: str = "DESC",
    nth: int = 1,
    hook: str = "judged.hook",
) -> str:
    """A column of the hook's nth latest (or earliest) action in one status: a range of
    the (hook, status, scheduled date) index read from one end, nth entries at most."""
    return (
        f"(SELECT {column} FROM {actions} WHERE hook = {hook} AND status = '{status}'"
        f" ORDER BY scheduled_date_gmt {order} LIMIT {nth - 1}, 1)"
    )


def _failed(
    actions: str, column: str = "scheduled_date_gmt", order: str = "DESC", nth: int = 1
) -> str:
    return _first(actions, "failed", column, order, nth, hook="candidate.hook")


def _exists(actions: str, status: str) -> str:
    # One EXISTS per status, each a range of one (hook, status) of the index that stops at
    # its first entry: with `status IN (...)` and a correlated hook, MariaDB uses the hook
    # part of the index alone and walks the hook's complete entries first.
    return f"EXISTS (SELECT 1 FROM {actions} WHERE hook = judged.hook AND status = '{status}')"


def _if_threshold(probe: str) -> str:
    # Read only for hooks with enough failures (a branch not taken is not evaluated).
    return f"CASE WHEN judged.threshold_failed_at IS NULL THEN NULL ELSE {probe} END"


def stopped_hooks(context: DatabaseContext, hooks: Sequence[str]) -> Iterator[str]:
    """The hooks among these (one statement, and one for logs) whose recurring job
    Action Scheduler stopped."""
    actions = context.tables.actions
    candidates = " UNION ALL ".join(["SELECT %s AS hook"] * len(hooks))
    # Every computed column named: a server names one by its expression, database and
    # all, and sends that name back with each answer.
    rows = context.query(
        "SELECT judged.hook,"
        f" {_exists(actions, 'pending')} OR {_exists(actions, 'in-progress')} AS has_open,"
        " judged.failed_at, judged.failed_schedule, judged.failed_id, judged.started_at,"
        f" {_first(actions, 'complete')} AS completed_at,"
        f" {_first(actions, 'canceled')} AS canceled_at,"
        " judged.threshold_failed_at,"
        f" {_if_threshold(_first(actions, 'complete', order='ASC'))} AS first_completed,"
        f" {_if_threshold(_first(actions, 'canceled', order='ASC'))} AS first_canceled"
        " FROM (SELECT candidate.hook,"
        f" {_failed(actions)} AS failed_at,"
        f" {_failed(actions, schedule_head())} AS failed_schedule,"
        f" {_failed(actions, 'action_id')} AS failed_id,"
        f" {_failed(actions, 'last_attempt_gmt')} AS started_at,"
        f" {_failed(actions, order='ASC', nth=FAILURE_THRESHOLD)}"
        " AS threshold_failed_at"
        f" FROM ({candidates}) AS candidate) AS judged",
        list(hooks),
    )
    undecided: dict[int, tuple[str, Any]] = {}
    for row in rows:
        hook, has_open, failed_at, schedule, failed_id, started_at = row[:6]
        completed_at, canceled_at, threshold_failed_at, first_completed, first_canceled = row[6:]
        if has_open or not isinstance(failed_at, dt.datetime) or not is_recurring(schedule):
            continue
        if _after(completed_at, failed_at) or _after(canceled_at, failed_at):
            continue  # its latest action is not the failure
        if isinstance(threshold_failed_at, dt.datetime) and not (
            _at_or_before(first_completed, threshold_failed_at)
            or _at_or_before(first_canceled, threshold_failed_at)
        ):
            yield label_value(hook)  # its first FAILURE_THRESHOLD actions all failed
        elif isinstance(failed_id, int):
            undecided[failed_id] = (label_value(hook), started_at)
    yield from _stopped_by_log(context, undecided)


def _after(date: Any, than: dt.datetime) -> bool:
    return isinstance(date, dt.datetime) and date > than


def _at_or_before(date: Any, than: dt.datetime) -> bool:
    return isinstance(date, dt.datetime) and date <= than


def _stopped_by_log(
    context: DatabaseContext, undecided: dict[int, tuple[str, Any]]
) -> Iterator[str]:
    """The hooks whose latest failed action's log rows say it was not rescheduled."""
    if not undecided:
        return
    ids = sorted(undecided)
    rows = context.query(
        f"SELECT action_id, LEFT(message, {_MESSAGE_HEAD}), log_date_gmt"
        f" FROM {context.tables.logs} WHERE action_id IN ({', '.join(['%s'] * len(ids))})",
        ids,
    )
    stopped: set[int] = set()
    for action_id, message, logged_at in rows:
        _, started_at = undecided.get(action_id, ("", None))
        # not label_value: a log message is no label, and must not fill its shared texts
        raw = bytes(message) if isinstance(message, bytes | bytearray) else None
        text = raw.decode("utf-8", errors="replace") if raw is not None else str(message or "")
        by_cleaner = (
            isinstance(logged_at, dt.datetime)
            and isinstance(started_at, dt.datetime)
            and logged_at - started_at >= FAILURE_PERIOD
        )
        if text.startswith(_NOT_RESCHEDULED) or by_cleaner:
            stopped.add(action_id)
    for action_id in sorted(stopped):
        yield undecided[action_id][0]
