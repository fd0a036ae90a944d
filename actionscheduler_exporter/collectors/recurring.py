"""Recurring jobs that Action Scheduler stopped: hooks with no next occurrence.

Since 3.5, a recurring action that keeps failing is not rescheduled, and a killed or
crashed run of one never reaches the rescheduling at all: the job is gone, and nothing
is logged that a query could count in another language. What the table says instead: the
hook's latest action (by scheduled date) is a failed interval or cron action, and no
action of the hook is pending or in progress. A canceled latest action is an unschedule,
which is intentional.

Heavy tier: the candidates are the hooks with failed actions, from the totals the tier has
already counted; each is then judged with reads of the (hook, status, scheduled date)
index that stop at the first row, a batch of hooks per statement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from actionscheduler_exporter.db.schema import is_recurring, label_value, schedule_head
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.folding import fold
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, DatabaseContext

HOOKS_PER_STATEMENT = 25


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


def _latest(actions: str, status: str, column: str = "scheduled_date_gmt") -> str:
    """A column of the hook's latest action in a status: the index read backwards."""
    return (
        f"(SELECT {column} FROM {actions} WHERE hook = candidate.hook AND status = '{status}'"
        " ORDER BY scheduled_date_gmt DESC LIMIT 1)"
    )


def stopped_hooks(context: DatabaseContext, hooks: Sequence[str]) -> Iterator[str]:
    """The hooks among these (one statement) whose recurring job has no next occurrence."""
    actions = context.tables.actions
    candidates = " UNION ALL ".join(["SELECT %s AS hook"] * len(hooks))
    rows = context.query(
        "SELECT candidate.hook,"
        f" EXISTS (SELECT 1 FROM {actions} WHERE hook = candidate.hook"
        "  AND status IN ('pending', 'in-progress')),"
        f" {_latest(actions, 'failed')}, {_latest(actions, 'failed', schedule_head())},"
        f" {_latest(actions, 'complete')}, {_latest(actions, 'canceled')}"
        f" FROM ({candidates}) AS candidate",
        list(hooks),
    )
    for hook, has_open, failed_at, failed_schedule, completed_at, canceled_at in rows:
        if has_open or failed_at is None or not is_recurring(failed_schedule):
            continue
        later = [date for date in (completed_at, canceled_at) if date is not None]
        if all(failed_at >= date for date in later):
            yield label_value(hook)
