"""The heavy tier's ledger without a server: chunking, checks instead of recounts, and
purges and moves that a check must catch. A session answers the ledger's statements from
rows held in memory, as the server would from the table (the slow tier,
tests/test_heavy_totals.py, proves the same against MariaDB)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.totals import ledger, shared_keys
from actionscheduler_exporter.totals.chunk import FINISHED
from actionscheduler_exporter.totals.ledger import ActionLedger, Totals
from tests.support.fake_session import FakeSession, Script

CHUNK = 20


@dataclass
class Action:
    status: str
    group: int
    hook: str = "hook"
    scheduled: str | None = "2026-12-01 10:00:00"


class Table:
    """The actions table's rows by id, and the answers the ledger's statements get."""

    def __init__(self, count: int) -> None:
        self.rows = {
            action_id: Action("complete" if action_id % 10 else "failed", action_id % 3)
            for action_id in range(1, count + 1)
        }
        self.rows[count].status = "pending"
        # The auto-increment counter's last id: deletions keep it, a TRUNCATE restarts it.
        self.handed_out = count

    def script(self) -> Script:
        return Script(
            [
                ("SELECT MAX(action_id)", self._max_id),
                ("SHOW CREATE TABLE", self._create_table),
                ("SELECT MIN(action_id)", self._next_id),
                ("GROUP BY 1, 2, 3", self._recount),
                ("GROUP BY status", self._open_statuses),
                ("scheduled_date_gmt IS NULL GROUP BY 1", self._open_undated),
                ("AS page GROUP BY 1", self._open_page),
                ("WHERE group_id IN", self._count_in_groups),
                ("FROM wp_actionscheduler_groups LIMIT", lambda _: [(0,), (1,), (2,)]),
            ]
        )

    def _max_id(self, _: Sequence[object] | None) -> list[Row]:
        self.handed_out = max([self.handed_out, *self.rows])
        return [(max(self.rows, default=None), 10**8)]

    def _create_table(self, _: Sequence[object] | None) -> list[Row]:
        return [
            (
                "wp_actionscheduler_actions",
                "CREATE TABLE `wp_actionscheduler_actions` (...) ENGINE=InnoDB"
                f" AUTO_INCREMENT={self.handed_out + 1} DEFAULT CHARSET=utf8mb4",
            )
        ]

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

    def _open_statuses(self, _: Sequence[object] | None) -> list[Row]:
        return [(s,) for s in sorted({r.status for r in self.rows.values()} - set(FINISHED))]

    def _open_undated(self, args: Sequence[object] | None) -> list[Row]:
        size, status = int(str((args or ())[0])), (args or ())[1]
        counts = Counter(
            i // size for i, r in self.rows.items() if r.status == status and r.scheduled is None
        )
        return list(counts.items())

    def _open_page(self, args: Sequence[object] | None) -> list[Row]:
        """The page statement of the ledger: keyset on (scheduled, id), then per cell."""
        size, status, *after, limit = list(args or ())
        keys = sorted(
            (r.scheduled, i)
            for i, r in self.rows.items()
            if r.status == status and r.scheduled is not None
        )
        if after:
            keys = [k for k in keys if k > (str(after[0]), int(str(after[2])))]
        page = keys[: int(str(limit))]
        counts: Counter[int] = Counter()
        last: dict[int, str] = {}
        for date, action_id in page:
            cell = action_id // int(str(size))
            counts[cell] += 1
            last[cell] = max(last.get(cell, ""), f"{date}{action_id:020d}")
        return [(cell, count, last[cell]) for cell, count in counts.items()]

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
    table.handed_out = 10  # truncated: the counter started again
    totals, _ = walk(ledger, table)
    assert totals.by_status_group == Counter({("canceled", 0): 10})


def test_a_purge_of_the_newest_actions_keeps_the_chunks(table: Table) -> None:
    """The highest id drops, but the counter went on: no id was handed out again, so the
    chunks stay and only those that lost rows are recounted (issue 38)."""
    ledger = ActionLedger(CHUNK, sleep=lambda _: None)
    walk(ledger, table)
    walk(ledger, table)
    newest = max(table.rows)
    for action_id in range(newest - 5, newest + 1):
        del table.rows[action_id]
    totals, _ = walk(ledger, table)
    assert totals.by_status_group == table.truth()
    assert totals.checked > 0 and totals.recounted <= 2


def test_open_actions_are_read_in_pages_of_the_index(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two million scheduled renewals are read a page at a time; here pages of 7 over 40
    open actions, several on one date (the key is the date and the id), one undated."""
    monkeypatch.setattr(ledger, "OPEN_PAGE_ROWS", 7)
    for action_id in range(100, 140):
        table.rows[action_id] = Action(
            "pending" if action_id % 4 else "in-progress",
            1,
            scheduled=f"2027-01-0{action_id % 3 + 1} 00:00:00",
        )
    table.rows[140] = Action("pending", 1, scheduled=None)
    walker = ActionLedger(CHUNK, sleep=lambda _: None)
    walk(walker, table)
    walk(walker, table)
    totals, session = walk(walker, table)
    assert totals.by_status_group == table.truth()
    pages = [sql for sql in session.sent if "AS page" in sql]
    assert len(pages) >= 40 // 7
    table.rows[120].status = "complete"  # one moves on: its chunk is recounted
    totals, _ = walk(walker, table)
    assert totals.by_status_group == table.truth()


def test_ledgers_share_one_copy_of_each_key_up_to_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 40: a thousand stores' ledgers each held their own copies of the same
    (status, group) keys and hook names (6.6 MiB). They share one copy of each, up to
    `MAX_SHARED_KEYS`; past it each ledger keeps one copy of the others."""
    monkeypatch.setattr(shared_keys, "_PAIRS", {})
    monkeypatch.setattr(shared_keys, "_HOOKS", {})
    one, other = shared_keys.KeyCopies(), shared_keys.KeyCopies()
    first = one.pair("pending", 1)
    assert other.pair("pending", int("1")) is first
    assert one.hook("".join(["wc_", "hook"])) is other.hook("wc_hook")
    monkeypatch.setattr(shared_keys, "MAX_SHARED_KEYS", 1)  # full: one of each
    own = one.pair("failed", 2)
    assert own == ("failed", 2) and one.pair("failed", int("2")) is own
    assert other.pair("failed", 2) is not own  # not shared: the other ledger's own copy
    assert len(shared_keys._PAIRS) == 1
    assert other.pair("pending", 1) is first
