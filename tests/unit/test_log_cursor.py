"""The log events collector's cursor and reset detection, without a server: ids that
commit out of order, gaps given up after their grace, a table emptied and refilled."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from exporter.config.model import SiteConfig
from exporter.db.schema import TableNames
from exporter.db.session import Row
from exporter.log_events.collector import LogEventsCollector
from exporter.log_events.cursor import LogCursor
from exporter.metrics import catalog
from exporter.sources.database import DatabaseContext
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


class Log:
    """A log table in memory: rows (log_id, action_id, message)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, str]] = []

    def script(self) -> Script:
        return Script(
            [
                ("COALESCE(MAX(log_id), 0)", self._newest),
                ("SELECT action_id FROM wp_actionscheduler_logs WHERE log_id", self._at),
                ("LEFT(message", self._after),
                ("SELECT action_id, hook, group_id", self._actions),
                ("SELECT action_id, log_id, log_date_gmt", lambda _: []),
            ]
        )

    def _newest(self, args: Sequence[object] | None) -> list[Row]:
        return [(max((r[0] for r in self.rows), default=0),)]

    def _at(self, args: Sequence[object] | None) -> list[Row]:
        last = int(str((args or [0])[0]))
        return [(next((a for log_id, a, _ in self.rows if log_id == last), None),)]

    def _after(self, args: Sequence[object] | None) -> list[Row]:
        start, limit = (int(str(value)) for value in args or ())
        return [(i, a, m, None) for i, a, m in self.rows if i > start][:limit]

    def _actions(self, args: Sequence[object] | None) -> list[Row]:
        return [(int(str(a)), "hook", 0, "pending", None) for a in args or ()]


def created(collector: LogEventsCollector, context: DatabaseContext) -> float:
    return sum(item.value for item in collector.read(context) if item.metric is catalog.CREATED)


def test_a_table_emptied_and_refilled_past_the_cursor_is_noticed() -> None:
    log = Log()
    log.rows = [(i, i, "action created") for i in range(1, 4)]
    site = dataclasses.replace(SiteConfig(name="shop"), log_gap_grace=30.0)
    session = FakeSession(site, log.script())
    context = DatabaseContext(session, TableNames("wp_"), site, {})
    collector = LogEventsCollector(site, FakeClock())
    assert created(collector, context) == 0  # the first read starts at the newest row
    log.rows += [(4, 4, "action created")]
    assert created(collector, context) == 1
    # Truncated and refilled with more rows: id 4 now holds another action.
    log.rows = [(i, 100 + i, "action created") for i in range(1, 7)]
    assert created(collector, context) == 7
    resets = [i.value for i in collector.read(context) if i.metric is catalog.LOG_CURSOR_RESETS]
    assert resets == [1]
