"""Exact totals over the whole actions table, in statements of bounded size.

A single `GROUP BY` over ten million actions runs for tens of seconds, holds a read view
that long and drags the table through the buffer pool. The ledger instead walks the
primary key in chunks of `heavy_chunk_rows` ids, one short statement each, pausing after
each for as long as it took (so the walk uses at most half of one connection's time),
and remembers every chunk's counts.

At the next refresh most chunks need no recount. Action Scheduler never changes a
finished action (complete, failed, canceled) again and never inserts below ids it has
handed out; it only moves open actions (pending, in-progress) on and deletes finished
ones (the cleaner's purge). So a chunk whose ids were handed out a refresh ago has
changed only if its number of rows changed (a deletion) or its open actions' counts per
status did (one moved on). Both are read without touching the table's rows: the rows on
the `group_id` index (index-only, one range per chunk) and the open actions of the whole
table, per chunk and status, on the `status_scheduled_date_gmt` index (one statement, as
long as the queue, not the table). Any difference, and the chunk is recounted. The totals
are therefore exact as of the walk that produced them: each row is counted once, in its
own chunk, during that walk.

A purge can delete the newest actions too (a canceled action that never ran), which
lowers the highest id as an emptied and refilled table does; the table's auto-increment
counter, which a purge leaves and a TRUNCATE restarts, tells the two apart, so a purge is
never a recount of the whole table.

Chunks that hold finished actions only can change by a purge alone; checking them is most
of a walk's cost at ten million actions (one index entry per row). With
`heavy_settled_check_every: N` they are checked in turns, each at every Nth walk, so a
purge in them shows within N refreshes; everything else still within one.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from actionscheduler_exporter.db.schema import (
    VALID_DATE_FLOOR,
    TableNames,
    label_value,
    placeholders,
    status_of,
)
from actionscheduler_exporter.db.session import Row, Session
from actionscheduler_exporter.errors import SourceError
from actionscheduler_exporter.totals.chunk import FINISHED, MAX_CHECKED_GROUPS, Chunk
from actionscheduler_exporter.totals.shared_keys import KeyCopies

# How long the walk rests after a statement, relative to the statement's own time.
PAUSE_RATIO = 1.0
# Index entries of open actions read per statement of a walk (a page).
OPEN_PAGE_ROWS = 50_000

_FINISHED_SQL = ", ".join(f"'{status}'" for status in FINISHED)


@dataclass
class Totals:
    """The whole table's counts, from one walk."""

    by_status_group: Counter[tuple[str, int | None]] = field(default_factory=Counter)
    failed_by_hook: Counter[str] = field(default_factory=Counter)
    # Seconds since the oldest complete or canceled action's last attempt (None: none).
    oldest_finished_age: float | None = None
    chunks: int = 0
    recounted: int = 0
    checked: int = 0
    skipped: int = 0  # settled chunks whose check was not due at this walk


class ActionLedger:
    """The chunk counts of one table prefix, kept between refreshes."""

    def __init__(
        self,
        chunk_rows: int,
        *,
        settled_check_every: int = 1,
        pause_ratio: float = PAUSE_RATIO,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`settled_check_every`: check a chunk of finished actions only, which nothing but
        a purge changes, at every Nth walk (the others every time)."""
        self._chunk_rows = chunk_rows
        self.settled_check_every = settled_check_every
        self._walks = 0
        self._keys = KeyCopies()
        self._pause_ratio = pause_ratio
        self._sleep = sleep
        self._chunks: list[Chunk] = []
        self._max_id: int | None = None  # the highest id at the previous walk
        self._lock = threading.Lock()

    def refresh(self, session: Session, tables: TableNames) -> Totals:
        """Walks the table; raises QueryError (and keeps what it had) if a statement fails."""
        with self._lock:
            walk = _RefreshStatements(
                session, tables, self._chunk_rows, self._keys, self._pause_ratio, self._sleep
            )
            self._walks += 1
            max_id, now = walk.high_water()
            previous_max = self._max_id
            lower = max_id is not None and previous_max is not None and max_id < previous_max
            if max_id is None or (lower and not walk.kept_counting(previous_max or 0)):
                # Empty, or emptied and refilled: ids may have been handed out again. A
                # purge of the newest actions (a canceled one that never ran, deleted at
                # the next cleanup) lowers the highest id too, but the table's counter
                # keeps counting: then the chunks stay, and the ones that lost rows are
                # recounted like after any purge.
                self._chunks = []
                self._max_id = None
            totals = Totals()
            # Ids handed out before the previous walk, or a whole chunk below the highest,
            # belong to inserts that have committed (Action Scheduler's are single
            # statements); a chunk counted now that ends at or below them may be checked
            # next time instead of recounted.
            previous = -1 if self._max_id is None else self._max_id
            basis = max(previous, (max_id or 0) - self._chunk_rows)
            every = self.settled_check_every
            for chunk in self._chunks:
                # Its turn by where it starts, which merging emptied neighbours keeps.
                turn = chunk.start // self._chunk_rows + self._walks
                if chunk.settled and turn % every:
                    totals.skipped += 1  # its turn comes at another walk
                elif chunk.checkable and walk.unchanged(chunk):
                    totals.checked += 1
                else:
                    walk.recount(chunk, basis)
                    totals.recounted += 1
            end = self._chunks[-1].end if self._chunks else -1
            size = self._chunk_rows
            while max_id is not None and (next_id := walk.next_id(end)) is not None:
                # From the last chunk's end (ids that come late in a gap are in it) to the
                # end of the next id's cell of the grid.
                chunk = Chunk(end + 1, (next_id // size + 1) * size - 1)
                walk.recount(chunk, basis)
                self._chunks.append(chunk)
                totals.recounted += 1
                end = chunk.end
            self._chunks = _merge_empty(self._chunks)
            self._max_id = max_id
            return _sum(self._chunks, now, totals)


class _RefreshStatements:
    """The statements of one refresh, each followed by its pause."""

    def __init__(
        self,
        session: Session,
        tables: TableNames,
        chunk_rows: int,
        keys: KeyCopies,
        pause_ratio: float,
        sleep: Callable[[float], None],
    ) -> None:
        self._session = session
        self._keys = keys
        self._actions = tables.actions
        self._groups = tables.groups
        self._chunk_rows = chunk_rows
        self._pause_ratio = pause_ratio
        self._sleep = sleep
        self._known_groups: list[int] | None = None
        # Open actions per grid cell (action_id // chunk_rows) and status, read once.
        self._open_by_cell: dict[int, Counter[str]] | None = None

    def high_water(self) -> tuple[int | None, int]:
        """The highest action id, and the database's UTC clock as seconds since the floor."""
        rows = self._query(
            f"SELECT MAX(action_id), TIMESTAMPDIFF(SECOND, %s, UTC_TIMESTAMP())"
            f" FROM {self._actions}",
            (VALID_DATE_FLOOR,),
        )
        max_id, now = rows[0]
        return (None if max_id is None else int(max_id)), int(now)

    def kept_counting(self, previous_max: int) -> bool:
        """Whether the table's auto-increment counter is beyond `previous_max`: its rows
        above were deleted, and no id was handed out again. A TRUNCATE or a re-created
        table starts the counter again; so does a server that does not persist it (MySQL
        5.7, MariaDB before 10.2.4) after a restart, and the table is then counted anew."""
        rows = self._query(f"SHOW CREATE TABLE {self._actions}", ())
        text = label_value(rows[0][1]) if rows and len(rows[0]) > 1 else ""
        found = re.search(r"\bAUTO_INCREMENT=(\d+)", text)
        return found is not None and int(found.group(1)) > previous_max

    def next_id(self, after: int) -> int | None:
        (found,) = self._query(
            f"SELECT MIN(action_id) FROM {self._actions} WHERE action_id > %s", (after,)
        )[0]
        return None if found is None else int(found)

    def recount(self, chunk: Chunk, basis: int) -> None:
        """Reads the chunk's rows; the chunk changes only if every statement succeeds."""
        rows = self._query(
            "SELECT status, group_id, IF(status = 'failed', hook, NULL), COUNT(*),"
            " TIMESTAMPDIFF(SECOND, %s, MIN(IF(status IN ('complete', 'canceled')"
            " AND last_attempt_gmt >= %s, last_attempt_gmt, NULL)))"
            f" FROM {self._actions} WHERE action_id BETWEEN %s AND %s GROUP BY 1, 2, 3",
            (VALID_DATE_FLOOR, VALID_DATE_FLOOR, chunk.start, chunk.end),
        )
        counted = Chunk(chunk.start, chunk.end, basis=basis, counted=True)
        for raw_status, raw_group, raw_hook, raw_count, oldest in rows:
            status = status_of(raw_status)
            group = None if raw_group is None else int(raw_group)
            count = int(raw_count)
            # Hundreds of chunks hold the same keys: one copy of each (memory).
            key = self._keys.pair(status, group)
            counted.by_status_group[key] += count
            counted.rows += count
            if status == "failed":
                hook = label_value(raw_hook)
                counted.failed_by_hook[self._keys.hook(hook)] += count
            if status not in FINISHED:
                counted.open_by_status[status] += count
            if oldest is not None:
                value = int(oldest)
                if counted.oldest_finished is None or value < counted.oldest_finished:
                    counted.oldest_finished = value
        _assign(chunk, counted)

    def unchanged(self, chunk: Chunk) -> bool:
        if self._open_in(chunk) != +chunk.open_by_status:
            return False
        # Its own groups and every other group the site has (while they are few): a row
        # committed late into the chunk is counted as well as a deleted one is missed.
        own = {group for group in chunk.groups if group is not None}
        groups = sorted({0, *own, *self._site_groups()})
        (count,) = self._query(
            f"SELECT COUNT(*) FROM {self._actions}"
            f" WHERE group_id IN ({placeholders(groups)}) AND action_id BETWEEN %s AND %s",
            [*groups, chunk.start, chunk.end],
        )[0]
        return int(count) == chunk.rows

    def _open_in(self, chunk: Chunk) -> Counter[str]:
        if self._open_by_cell is None:
            self._open_by_cell = self.open_counts()
        found: Counter[str] = Counter()
        first, last = chunk.start // self._chunk_rows, chunk.end // self._chunk_rows
        for cell, by_status in self._open_by_cell.items():
            if first <= cell <= last:  # chunks are whole cells of the grid
                found.update(by_status)
        return +found

    def open_counts(self) -> dict[int, Counter[str]]:
        """The open actions per grid cell and status, read once per walk in pages of the
        (status, scheduled_date_gmt) index: a store with two million scheduled renewals
        is read in statements of `OPEN_PAGE_ROWS` index entries, not one of two million."""
        by_cell: dict[int, Counter[str]] = {}
        statuses = self._query(
            f"SELECT status FROM {self._actions}"
            f" WHERE status NOT IN ({_FINISHED_SQL}) GROUP BY status",
            (),
        )
        for (raw_status,) in statuses:
            status = status_of(raw_status)
            for cell, count in self._open_of(raw_status):
                by_status = by_cell.setdefault(cell, Counter())
                by_status[status] += count
        return by_cell

    def _open_of(self, status: object) -> Iterator[tuple[int, int]]:
        """(cell, count) of one status's open actions: the NULL-dated ones (which Action
        Scheduler never writes) in one statement, the others page by page in the index's
        order, each page ending at the greatest (date, id) key it read."""
        size = self._chunk_rows
        for cell, count in self._query(
            f"SELECT action_id DIV %s, COUNT(*) FROM {self._actions}"
            " WHERE status = %s AND scheduled_date_gmt IS NULL GROUP BY 1",
            (size, status),
        ):
            yield int(cell), int(count)
        after: tuple[str, int] | None = None
        while True:
            args: tuple[object, ...] = ()
            if after is None:
                condition = "scheduled_date_gmt IS NOT NULL"
            else:
                condition = (
                    "(scheduled_date_gmt > %s OR (scheduled_date_gmt = %s AND action_id > %s))"
                )
                args = (after[0], after[0], after[1])
            rows = self._query(
                # The key as one sortable text: its greatest is the page's last entry.
                "SELECT action_id DIV %s, COUNT(*),"
                " MAX(CONCAT(DATE_FORMAT(scheduled_date_gmt, '%%Y-%%m-%%d %%H:%%i:%%s'),"
                " LPAD(action_id, 20, '0')))"
                f" FROM (SELECT action_id, scheduled_date_gmt FROM {self._actions}"
                f" WHERE status = %s AND {condition}"
                " ORDER BY scheduled_date_gmt, action_id LIMIT %s) AS page GROUP BY 1",
                (size, status, *args, OPEN_PAGE_ROWS),
            )
            read = 0
            last = ""
            for cell, count, key in rows:
                read += int(count)
                last = max(last, label_value(key))
                yield int(cell), int(count)
            if read < OPEN_PAGE_ROWS or not last:
                return
            after = (last[:19], int(last[19:]))

    def _site_groups(self) -> list[int]:
        """The groups table's ids, read once per walk; none when there are too many."""
        if self._known_groups is None:
            found = self._query(
                f"SELECT group_id FROM {self._groups} LIMIT %s", (MAX_CHECKED_GROUPS + 1,)
            )
            ids = [int(group_id) for (group_id,) in found]
            self._known_groups = ids if len(ids) <= MAX_CHECKED_GROUPS else []
        return self._known_groups

    def _query(self, sql: str, args: Sequence[object]) -> list[Row]:
        started = time.perf_counter()
        rows = self._session.query(sql, args)
        if self._pause_ratio > 0:
            self._sleep((time.perf_counter() - started) * self._pause_ratio)
        return rows


def read_open_counts(
    session: Session,
    tables: TableNames,
    chunk_rows: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[int, Counter[str]]:
    """The open actions per grid cell and status, as a walk reads them (the benchmark
    measures its statements)."""
    walk = _RefreshStatements(session, tables, chunk_rows, KeyCopies(), PAUSE_RATIO, sleep)
    return walk.open_counts()


def _assign(chunk: Chunk, counted: Chunk) -> None:
    for name in (
        "by_status_group",
        "failed_by_hook",
        "oldest_finished",
        "rows",
        "open_by_status",
        "basis",
        "counted",
    ):
        setattr(chunk, name, getattr(counted, name))


def _merge_empty(chunks: list[Chunk]) -> list[Chunk]:
    """Neighbouring chunks emptied by purges become one, so old history costs one check."""
    merged: list[Chunk] = []
    for chunk in chunks:
        last = merged[-1] if merged else None
        if last is not None and _empty(last) and _empty(chunk):
            last.end = chunk.end
            last.basis = max(last.basis, chunk.basis)
        else:
            merged.append(chunk)
    return merged


def _empty(chunk: Chunk) -> bool:
    return chunk.counted and chunk.rows == 0 and chunk.checkable


def _sum(chunks: list[Chunk], now: int, totals: Totals) -> Totals:
    oldest: int | None = None
    for chunk in chunks:
        totals.by_status_group.update(chunk.by_status_group)
        totals.failed_by_hook.update(chunk.failed_by_hook)
        if chunk.oldest_finished is not None and (oldest is None or chunk.oldest_finished < oldest):
            oldest = chunk.oldest_finished
    totals.oldest_finished_age = None if oldest is None else float(now - oldest)
    totals.chunks = len(chunks)
    return totals


class TotalsOnce:
    """One walk for the collectors that read the same totals in one round or refresh: the
    first one walks, the others get its totals (or its error)."""

    def __init__(self, ledger: ActionLedger, session: Session, tables: TableNames) -> None:
        self._ledger = ledger
        self._session = session
        self._tables = tables
        self._totals: Totals | None = None
        self._error: SourceError | None = None

    def __call__(self) -> Totals:
        if self._totals is None and self._error is None:
            try:
                self._totals = self._ledger.refresh(self._session, self._tables)
            except SourceError as error:
                self._error = error
        if self._error is not None:
            raise self._error
        assert self._totals is not None
        return self._totals


class PrefixLedgers:
    """A site's ledgers, one per table prefix (several for `table_prefix: auto`)."""

    def __init__(self, chunk_rows: int, settled_check_every: int = 1) -> None:
        self._chunk_rows = chunk_rows
        self._settled_check_every = settled_check_every
        self._by_prefix: dict[str, ActionLedger] = {}
        self._lock = threading.Lock()

    def walk(self, prefix: str, session: Session, tables: TableNames) -> TotalsOnce:
        with self._lock:
            ledger = self._by_prefix.get(prefix)
            if ledger is None:
                ledger = self._by_prefix[prefix] = ActionLedger(
                    self._chunk_rows, settled_check_every=self._settled_check_every
                )
        return TotalsOnce(ledger, session, tables)

    def keep(self, prefixes: Sequence[str]) -> None:
        """Forgets the counts of prefixes whose tables are gone."""
        with self._lock:
            for prefix in set(self._by_prefix) - set(prefixes):
                del self._by_prefix[prefix]
