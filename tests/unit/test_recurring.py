"""The stopped-recurring verdict from the rows its two statements return (the slow tier,
tests/test_runners_and_recurring.py, proves the statements on MariaDB)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from actionscheduler_exporter.collectors import recurring
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.sources.database import DatabaseContext
from tests.support.fake_session import FakeSession, Script

NOW = dt.datetime(2026, 5, 4, 12, 0, 0)
INTERVAL = 'O:32:"ActionScheduler_IntervalSchedule"'
SINGLE = 'O:30:"ActionScheduler_SimpleSchedule"'


def ago(minutes: float) -> dt.datetime:
    return NOW - dt.timedelta(minutes=minutes)


def judged(
    hook: str,
    action_id: int,
    *,
    has_open: int = 0,
    schedule: str = INTERVAL,
    completed: dt.datetime | None = None,
    canceled: dt.datetime | None = None,
    fifth_failure: dt.datetime | None = None,
    first_completed: dt.datetime | None = None,
) -> Row:
    """A row of the first statement: the latest failure ran at NOW - 1 minute."""
    return (
        hook, has_open, ago(1), schedule, action_id, ago(1),
        completed, canceled, fifth_failure, first_completed, None,
    )  # fmt: skip


def stopped(rows: list[Row], logs: list[Row] | None) -> list[str]:
    """The verdict; with logs None, the log table is not scripted: reading it fails."""

    def log_rows(args: Sequence[object] | None) -> list[Row]:
        return [row for row in logs or [] if args and row[0] in args]

    script = Script().answer("AS judged", rows)
    if logs is not None:
        script.answer("actionscheduler_logs", log_rows)
    site = SiteConfig(name="shop")
    context = DatabaseContext(FakeSession(site, script), TableNames("wp_"), site, {})
    hooks = [str(row[0]) for row in rows]
    return sorted(recurring.stopped_hooks(context, hooks))


def test_a_job_is_stopped_only_where_action_scheduler_stopped_it() -> None:
    rows = [
        judged("five_failures", 1, fifth_failure=ago(30)),
        judged("unscheduled_and_purged", 2),  # three failures, its canceled row purged
        judged("stop_row", 3),
        judged("killed_worker_translated", 4),
        judged("fatal_error", 5),
        judged("completed_since", 6, completed=ago(0.5)),
        judged("canceled_since", 7, canceled=ago(0.5)),
        judged("still_pending", 8, has_open=1, fifth_failure=ago(30)),
        judged("not_recurring", 9, schedule=SINGLE, fifth_failure=ago(30)),
        # five failures, but a run before the fifth completed: Action Scheduler went on
        judged("completed_before_the_fifth", 10, fifth_failure=ago(30), first_completed=ago(40)),
        judged("plugin_row", 11),
    ]
    logs = [
        (2, "action failed via WP CLI: Supplier API unreachable", ago(1)),
        (3, "action failed via WP CLI: Supplier API unreachable", ago(1)),
        (3, "This action appears to be consistently failing. A new instance will", ago(1)),
        (4, "Aktion gestartet über WP CLI", ago(1)),
        (
            4,
            "Aktion nach 300 Sekunden als fehlgeschlagen markiert",
            ago(1) + dt.timedelta(minutes=6),
        ),
        (5, "unexpected shutdown: PHP Fatal error Uncaught Error in x.php on", ago(1)),
        (10, "action failed via WP CLI: Supplier API unreachable", ago(1)),
        (11, "action failed via WP CLI: x", ago(1)),
        (11, "Webhook delivered: HTTP 200", ago(1)),
    ]
    assert stopped(rows, logs) == [
        "fatal_error",
        "five_failures",
        "killed_worker_translated",
        "stop_row",
    ]


def test_no_hook_left_undecided_sends_no_log_statement() -> None:
    rows = [judged("five_failures", 1, fifth_failure=ago(30))]
    assert stopped(rows, None) == ["five_failures"]
