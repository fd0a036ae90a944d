"""The log events collector's cursor and reset detection, without a server: ids that
commit out of order, gaps given up after their grace, a table emptied and refilled."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

from actionscheduler_exporter.collectors.log_events.collector import LogEventsCollector
from actionscheduler_exporter.collectors.log_events.cursor import LogCursor
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.sources.database import DatabaseContext
from tests.support.clock import FakeClock
from tests.support.fake_session import FakeSession, Script


def test_a_gap_holds_the_cursor_until_its_row_commits() -> None:
    cursor = LogCursor(10, grace_seconds=30)
    assert cursor.advance([11, 13], now=0.0) == 0
    assert cursor.position == 11  # 12 is missing: it may still commit
    assert not cursor.is_new(13) and cursor.is_new(12)
    assert cursor.advance([12], now=5.0) == 0
    assert cursor.position == 13


def test_a_gap_is_given_up_after_its_grace() -> None:
    cursor = LogCursor(0, grace_seconds=30)
    cursor.advance([1, 4], now=0.0)
    assert cursor.advance([], now=31.0) == 2  # 2 and 3 never came
    assert cursor.position == 4


def test_a_restart_reads_from_the_beginning() -> None:
    cursor = LogCursor(500)
    cursor.restart()
    assert cursor.position == 0 and cursor.is_new(1)


DAY_ONE = dt.datetime(2026, 12, 1, 10, 0, 0)


class Log:
    """A log table in memory: rows (log_id, action_id, message, date), and the server's
    auto_increment_increment."""

    def __init__(self, increment: int = 1) -> None:
        self.rows: list[tuple[int, int, str, dt.datetime]] = []
        self.increment = increment

    def add(self, count: int, *, start: int = 1, step: int = 1, second: int = 0) -> None:
        """`count` "action created" rows, ids from `start` every `step`, one a second."""
        for index in range(count):
            log_id = start + index * step
            date = DAY_ONE + dt.timedelta(seconds=second + index)
            self.rows.append((log_id, log_id, "action created", date))

    def script(self) -> Script:
        return Script(
            [
                ("COALESCE(MAX(log_id), 0)", self._newest),
                ("FROM wp_actionscheduler_logs WHERE log_id = %s", self._at),
                ("@@auto_increment_increment", lambda _: [(self.increment,)]),
                ("SELECT action_id, log_id, log_date_gmt", lambda _: []),
                ("LEFT(message", self._after),
                ("SELECT action_id, hook, group_id", self._actions),
            ]
        )

    def _newest(self, args: Sequence[object] | None) -> list[Row]:
        return [(max((r[0] for r in self.rows), default=0),)]

    def _at(self, args: Sequence[object] | None) -> list[Row]:
        last = int(str((args or [0])[0]))
        found = [f"{a} {d:%Y-%m-%d %H:%M:%S}" for i, a, _, d in self.rows if i == last]
        return [(found[0] if found else None,)]

    def _after(self, args: Sequence[object] | None) -> list[Row]:
        start, limit = (int(str(value)) for value in args or ())
        return [
            (i, a, m, d, f"{a} {d:%Y-%m-%d %H:%M:%S}")
            for i, a, m, d in sorted(self.rows)
            if i > start
        ][:limit]

    def _actions(self, args: Sequence[object] | None) -> list[Row]:
        return [(int(str(a)), "hook", 0, "pending", None, "") for a in args or ()]


def created(collector: LogEventsCollector, context: DatabaseContext) -> float:
    return sum(item.value for item in collector.read(context) if item.metric is catalog.CREATED)


def follower(log: Log, **site: Any) -> tuple[LogEventsCollector, DatabaseContext, FakeClock]:
    config = dataclasses.replace(SiteConfig(name="shop"), log_gap_grace=30.0, **site)
    session = FakeSession(config, log.script())
    clock = FakeClock()
    return (
        LogEventsCollector(config, clock),
        DatabaseContext(session, TableNames("wp_"), config, {}),
        clock,
    )


def read(collector: LogEventsCollector, context: DatabaseContext) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in collector.read(context):
        values[item.metric.name] = values.get(item.metric.name, 0) + item.value
    return {"actionscheduler_actions_created": 0.0, **values}


def test_a_table_emptied_and_refilled_past_the_cursor_is_noticed() -> None:
    log = Log()
    log.add(3)
    collector, context, _ = follower(log)
    assert read(collector, context)["actionscheduler_actions_created"] == 0  # starts at the newest
    log.add(1, start=4, second=3)
    assert read(collector, context)["actionscheduler_actions_created"] == 1
    # Truncated and refilled with more rows: id 4 now holds another action.
    log.rows = []
    log.add(6, start=1, second=100)
    log.rows = [(i, 100 + i, m, d) for i, _, m, d in log.rows]
    found = read(collector, context)
    assert found["actionscheduler_actions_created"] == 7
    assert found["actionscheduler_log_cursor_resets"] == 1


def test_a_refill_with_the_same_actions_is_noticed_by_the_dates() -> None:
    """Issue 25, item 7c: both tables truncated and refilled with the same rows-per-action
    pattern: the last id read held the same action again, and the reset went unnoticed."""
    log = Log()
    log.add(4)
    collector, context, _ = follower(log)
    read(collector, context)
    log.add(2, start=5, second=4)
    assert read(collector, context)["actionscheduler_actions_created"] == 2
    log.rows = []
    log.add(10, second=3600)  # the same ids and actions, an hour later
    found = read(collector, context)
    assert found["actionscheduler_log_cursor_resets"] == 1
    assert found["actionscheduler_actions_created"] == 2 + 10


def test_a_restored_backup_is_not_counted_again() -> None:
    """Issue 25, item 7b: a table replaced by its first 20 of 27 rows replayed history."""
    log = Log()
    log.add(7)
    collector, context, _ = follower(log)
    read(collector, context)
    log.add(20, start=8, second=7)
    assert read(collector, context)["actionscheduler_actions_created"] == 20
    log.rows = log.rows[:20]  # the backup: older rows only
    found = read(collector, context)
    assert found["actionscheduler_log_cursor_resets"] == 1
    assert found["actionscheduler_actions_created"] == 20  # nothing replayed
    log.add(2, start=21, second=500)  # new activity after the restore
    assert read(collector, context)["actionscheduler_actions_created"] == 22


def test_ids_a_stride_apart_are_not_gaps() -> None:
    """Issue 25, item 7a: with auto_increment_increment 3 (Galera), 1,000 actions gave
    3,000 missed rows and a lag of 6,000, and the cursor parked below the first gap."""
    log = Log(increment=3)
    log.add(1, start=2)
    collector, context, clock = follower(log, log_rows_per_scrape=10)
    read(collector, context)
    log.add(30, start=5, step=3, second=1)
    for _ in range(4):
        clock.advance(60)  # past the gap grace: nothing to give up
        found = read(collector, context)
    assert found["actionscheduler_actions_created"] == 30
    assert found["actionscheduler_log_rows_missed"] == 0
    assert found["actionscheduler_log_cursor_lag_rows"] == 0


def test_the_lag_leaves_out_rows_read_beyond_a_gap() -> None:
    """Issue 25, item 7d: lag_rows counted rows already read while a gap waited."""
    log = Log()
    log.add(1)
    collector, context, _ = follower(log)
    read(collector, context)
    log.add(4, start=2, second=1)
    log.add(6, start=7, second=6)  # id 6 not committed yet
    found = read(collector, context)
    assert found["actionscheduler_actions_created"] == 10
    assert found["actionscheduler_log_cursor_lag_rows"] == 1  # only id 6


def test_a_last_row_read_behind_the_cursor_is_not_read_again_nor_missed() -> None:
    """A fetch cut by the row limit ends below rows read earlier beyond a gap: the next
    fetch starts at the cursor, not at that last row (which would read rows twice, and a
    row purged meanwhile would be counted as missed)."""
    log = Log()
    log.add(10)
    collector, context, clock = follower(log, log_rows_per_scrape=3)
    read(collector, context)  # starts at 10
    log.add(3, start=12, second=12)  # 11 is not committed yet
    assert read(collector, context)["actionscheduler_actions_created"] == 3
    log.add(1, start=11, second=11)
    log.add(3, start=15, second=15)
    # Reads 11, 12, 13 (the limit): the cursor is at 14 now, the last row read is 13.
    assert read(collector, context)["actionscheduler_actions_created"] == 4
    log.rows = [row for row in log.rows if row[0] != 14]  # its action purged
    assert read(collector, context)["actionscheduler_actions_created"] == 7
    clock.advance(60)  # past the gap grace
    found = read(collector, context)
    assert found["actionscheduler_actions_created"] == 7
    assert found["actionscheduler_log_rows_missed"] == 0
    assert found["actionscheduler_log_cursor_lag_rows"] == 0
