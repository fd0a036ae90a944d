"""The heavy tier's ledger without a server: chunking, checks instead of recounts, and
purges and moves that a check must catch. A session answers the ledger's statements from
rows held in memory, as the server would from the table (the slow tier,
tests/test_heavy_totals.py, proves the same against MariaDB)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from exporter.config.model import SiteConfig
from exporter.db.schema import TableNames
from exporter.db.session import Row
from exporter.totals.chunk import FINISHED
from exporter.totals.ledger import ActionLedger, Totals
from tests.support.fake_session import FakeSession, Script

CHUNK = 20


@dataclass
class Action:
    status: str
    group: int
    hook: str = "hook"


class Table:
    """The actions table's rows by id, and the answers the ledger's statements get."""

    def __init__(self, count: int) -> None:
        self.rows = {
            action_id: Action("complete" if action_id % 10 else "failed", action_id % 3)
            for action_id in range(1, count + 1)
        }
        self.rows[count].status = "pending"

    def script(self) -> Script:
        return Script(
            [
                ("SELECT MAX(action_id)", lambda _: [(max(self.rows, default=None), 10**8)]),
                ("SELECT MIN(action_id)", self._next_id),
                ("GROUP BY 1, 2, 3", self._recount),
                ("action_id DIV %s, status", self._open_by_cell),
                ("WHERE group_id IN", self._count_in_groups),
                ("FROM wp_actionscheduler_groups LIMIT", lambda _: [(0,), (1,), (2,)]),
            ]
        )

    def _next_id(self, args: Sequence[object] | None) -> list[Row]:
        (after,) = ints(args)
        return [(min((i for i in self.rows if i > after), default=None),)]

    def _recount(self, args: Sequence[object] | None) -> list[Row]:
        start, end = ints(list(args or ())[2:])
        counts: Counter[tuple[str, int, str | None]] = Counter()
        for action_id, row in self.rows.items():
            if start <= action_id <= end:
                counts[(row.status, row.group, row.hook if row.status == "failed" else None)] += 1
        return [(s, g, h, n, None) for (s, g, h), n in counts.items()]

    def _open_by_cell(self, args: Sequence[object] | None) -> list[Row]:
        (size,) = ints(args)
        counts = Counter(
            (i // size, row.status) for i, row in self.rows.items() if row.status not in FINISHED
        )
        return [(cell, status, n) for (cell, status), n in counts.items()]

    def _count_in_groups(self, args: Sequence[object] | None) -> list[Row]:
        *groups, start, end = ints(args)
        return [(sum(1 for i, r in self.rows.items() if start <= i <= end and r.group in groups),)]

    def truth(self) -> Counter[tuple[str, int | None]]:
        return Counter((row.status, row.group) for row in self.rows.values())


def ints(args: Sequence[object] | None) -> list[int]:
    assert args is not None
    return [int(str(value)) for value in args]


@pytest.fixture
def table() -> Table:
    return Table(95)


def walk(ledger: ActionLedger, table: Table) -> tuple[Totals, FakeSession]:
    session = FakeSession(SiteConfig(name="shop"), table.script(), seconds_per_statement=0)
    return ledger.refresh(session, TableNames("wp_")), session


def test_the_walk_counts_in_chunks_of_the_grid_and_equals_the_table(table: Table) -> None:
    ledger = ActionLedger(CHUNK, sleep=lambda _: None)
    totals, session = walk(ledger, table)
    assert totals.by_status_group == table.truth()
    assert totals.chunks == 5  # ids 1..95 in cells of 20
    assert totals.recounted == 5
    assert len([sql for sql in session.sent if "GROUP BY 1, 2, 3" in sql]) == 5
    assert totals.failed_by_hook == Counter({"hook": 9})


def test_an_unchanged_table_is_checked_not_recounted(table: Table) -> None:
    ledger = ActionLedger(CHUNK, sleep=lambda _: None)
    walk(ledger, table)
    walk(ledger, table)  # the ids of the first walk have been handed out for a refresh now
    totals, session = walk(ledger, table)
    assert totals.by_status_group == table.truth()
    assert totals.recounted <= 1  # the last chunk, too recent to rule out a late insert
    assert totals.checked >= 4
    assert len([sql for sql in session.sent if "GROUP BY 1, 2, 3" in sql]) == totals.recounted


@pytest.mark.parametrize(
    "change",
    ["purge", "completed", "inserted"],
)
def test_a_purge_a_move_or_an_insert_is_caught_at_the_next_walk(table: Table, change: str) -> None:
    ledger = ActionLedger(CHUNK, sleep=lambda _: None)
    for _ in range(3):
        walk(ledger, table)
    if change == "purge":  # the cleaner deletes finished actions of the first chunk
        for action_id in (2, 3, 4):
            del table.rows[action_id]
    elif change == "completed":  # the one pending action is run
        table.rows[95].status = "complete"
    else:
        table.rows[96] = Action("pending", 1)
    totals, _ = walk(ledger, table)
    assert totals.by_status_group == table.truth()
    assert totals.recounted >= 1


def test_settled_chunks_are_checked_in_turns(table: Table) -> None:
    ledger = ActionLedger(CHUNK, settled_check_every=2, sleep=lambda _: None)
    for _ in range(3):
        walk(ledger, table)
    first, _ = walk(ledger, table)
    second, _ = walk(ledger, table)
    assert first.skipped > 0 and second.skipped > 0
    assert first.skipped + second.skipped == 4  # each of the 4 settled chunks once in two


def test_an_emptied_and_refilled_table_is_counted_afresh(table: Table) -> None:
    ledger = ActionLedger(CHUNK, sleep=lambda _: None)
    walk(ledger, table)
    table.rows = {i: Action("canceled", 0) for i in range(1, 11)}
    totals, _ = walk(ledger, table)
    assert totals.by_status_group == Counter({("canceled", 0): 10})
