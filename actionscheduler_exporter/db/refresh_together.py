"""Cached readings of many stores of one server, refreshed in one statement.

A collector cached between rounds (the anomalies, read about once a minute: each table
prefix at its own point of its interval) sends a statement of its own when its reading
comes due. At Prometheus' pace, a scrape every 15 s, a quarter of a thousand stores'
anomalies came due between two scrapes: the scrapes sent five times the statements of
the benchmark's, whose scrapes came about once a second (docs/performance.md). Here the
store whose reading comes due reads, in one `UNION ALL` (`db.union`), the same source's
statement of up to `BATCH - 1` other stores of its server and login whose readings come
due within a quarter of their interval (`WINDOW_SHARE`), the soonest first. Each of those
takes its row when its own reading comes due, and is served from it as if read then: its
reading counts from when the row was read, and no row older than the reading's interval
is taken (`take`).

The tables' statistics (about every five minutes) come due and are read so too, apart
from the hot statement: in it, the store's statement was sent alone, not packed, and
differed from the one read ahead for it, at the refresh and at the next scrape.

A store is read with others only while its own statement answers quickly (the
read-ahead's `FAST_SECONDS`), its answer of whole numbers or of texts, as a union keeps
them. A batch that fails is not used, and each of its stores reads alone until its
statement answered alone again; a slow one's rows are used, but its stores are read
alone at their next refresh (the read-ahead's bounds). The clock is the sites' (`now`),
as their cached readings' intervals are.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from pymysql.constants import FIELD_TYPE

from actionscheduler_exporter.db.packed import PackedStatement
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.read_ahead import (
    BATCH,
    FAST_SECONDS,
    FORGET_SECONDS,
    SLOW_BATCH_FACTOR,
    SLOW_BATCH_SECONDS,
    Key,
)
from actionscheduler_exporter.db.session import Row, Session
from actionscheduler_exporter.db.union import rows_by_place, union_statement

# A store whose reading comes due within this share of its interval is read with the
# store whose reading is due now: at a scrape every 15 s, the anomalies (60 s) of the
# stores that come due before the next scrape.
WINDOW_SHARE = 0.25
# The types a union keeps as the driver makes them alone, when every column of the
# answer has one of them: whole numbers, which Python makes the same `int` of whatever
# their width (a union of a signed and an unsigned one is a decimal: not used), or texts
# (the tables' statistics), the same `str` whatever their length.
_WHOLE_NUMBERS = frozenset(
    {FIELD_TYPE.TINY, FIELD_TYPE.SHORT, FIELD_TYPE.LONG, FIELD_TYPE.INT24, FIELD_TYPE.LONGLONG}
)
_TEXTS = frozenset(
    {
        FIELD_TYPE.VARCHAR,
        FIELD_TYPE.VAR_STRING,
        FIELD_TYPE.STRING,
        FIELD_TYPE.TINY_BLOB,
        FIELD_TYPE.MEDIUM_BLOB,
        FIELD_TYPE.LONG_BLOB,
        FIELD_TYPE.BLOB,
    }
)

# A store's reading of one source: the store (`read_ahead.Key`, its login first) and the
# source's name.
StoreSource = tuple[Key, str]


class _Store:
    """A store's reading of one source as the batches know it: made when it is first
    kept, then hashed and compared by identity (a `StoreSource` holds the login's TLS
    settings: a Python call to hash or compare at each look, which made a thousand
    stores' look for the ones due soon a tenth of the interpreter's time at Prometheus'
    pace). `login` is shared by the stores of one login."""

    __slots__ = ("login", "source")

    def __init__(self, login: object, source: str) -> None:
        self.login = login
        self.source = source


@dataclass(slots=True)
class _Due:
    """A store's last reading of a source: its statement, when it comes due, how long a
    reading is served, and how long its statement took."""

    store: _Store
    statement: PackedStatement
    database: str
    due_at: float  # the sites' clock
    fresh_for: float  # seconds a reading is served after it was read
    seconds: float  # its statement's last time: alone, or its share of a batch
    alone: float  # its statement's time when it was last read alone
    healthy: bool = True
    # From when it is read with a store due now, and until when (past it, the store has
    # stopped asking: gone, down, or left to another shard; its row would not be taken).
    opens: float = field(init=False)
    closes: float = field(init=False)

    def __post_init__(self) -> None:
        self.opens = self.due_at - WINDOW_SHARE * self.fresh_for
        self.closes = self.due_at + self.fresh_for


@dataclass
class _Early:
    """A row read for a store in another store's batch, waiting for its reading to come
    due."""

    statement: PackedStatement
    row: Row
    at: float  # when it was read (the sites' clock)
    share: float  # the store's share of the batch's time


class Found(NamedTuple):
    """A store's row read in a batch: when (the sites' clock), and its share of the
    batch's time."""

    row: Row
    read_at: float
    share: float


@dataclass
class _Batch:
    # Each store, its statement and its database; the sender's first.
    members: list[tuple[_Store, PackedStatement, str]]
    usual: float  # the members' last times alone, added up
    done: threading.Event = field(default_factory=threading.Event)


# What `_batch_from` finds of a store whose row another round's batch read (or is
# reading) since the store looked for one: take it.
_TAKEN_MEANWHILE: Final = _Batch([], 0.0)


class RefreshTogether:
    """One per database server (its lane), shared by the rounds of all its stores."""

    def __init__(self, batch: int = BATCH) -> None:
        self._batch = batch
        self._lock = threading.Lock()
        self._stores: dict[StoreSource, _Store] = {}
        self._logins: dict[object, object] = {}  # each login once, for `_Store.login`
        self._due: dict[str, dict[_Store, _Due]] = {}  # by source
        self._early: dict[_Store, _Early] = {}
        self._flying: dict[_Store, _Batch] = {}
        self._tidied_at = 0.0
        self.batches = 0  # statements that read more than one store (tests, benchmarks)

    def take(
        self, store: StoreSource, statement: PackedStatement, now: float, wait: float
    ) -> Found | None:
        """The row read for the store in another store's batch; None when there is none,
        or one of another statement, or one older than the store's reading is served. A
        batch reading it now is waited for (`wait` seconds at most)."""
        with self._lock:
            known = self._stores.get(store)
            flying = None if known is None else self._flying.get(known)
        if known is None:
            return None
        if flying is not None:
            flying.done.wait(wait)
        return self._taken(known, statement, now)

    def refresh(
        self,
        session: Session,
        store: StoreSource,
        statement: PackedStatement,
        now: float,
        wait: float,
    ) -> Found | None:
        """The store's row of `statement`, read now with the rows of the stores whose
        reading of the same source comes due soon (or taken, when another round's batch
        read it meanwhile); None when none can be read with it, or the batch failed: the
        store then reads alone. Raises QueryError when the session cannot connect, or
        its connection is lost, as the store's own statement would (the stores read with
        it are not to blame)."""
        session.ready()  # first: the batch's time is not the wait for a connection
        with self._lock:
            known = self._stores.get(store)
        if known is None:
            return None  # never kept: read alone first
        batch = self._batch_from(known, statement, now)
        if batch is None:
            return None
        if batch is _TAKEN_MEANWHILE:
            return self.take(store, statement, now, wait)
        started = time.perf_counter()
        rows: dict[int, Row] | None = None
        blamed = True  # whether a failure is the batch's stores'
        try:
            members = [(each, database) for _, each, database in batch.members]
            sql, every_arg = union_statement(session.server_version, members)
            with session.billed_to(_not_billed):
                found, types = session.query_typed(sql, every_arg)
            if _kept_as_alone(types[1:]):
                rows = rows_by_place(found, len(members), statement.width)
        except QueryError as error:
            if error.connection_lost:
                blamed = False
                raise
        finally:
            seconds = time.perf_counter() - started
            self._land(batch, rows, seconds, now, blamed=blamed)
        if rows is None:
            return None
        # Billed to the store as the other stores' shares are, when its reading is made.
        return Found(rows[0], now, seconds / len(batch.members))

    def kept(
        self,
        store: StoreSource,
        statement: PackedStatement,
        database: str,
        due_at: float,
        fresh_for: float,
        seconds: float,
        *,
        alone: bool,
    ) -> None:
        """The store's reading was kept until `due_at` (served `fresh_for` seconds after it
        was read), made of a row of `statement` that took `seconds` (read `alone`, or its
        share of a batch: then its health stays as it was)."""
        key, source = store
        with self._lock:
            known = self._stores.get(store)
            if known is None:
                login = self._logins.setdefault(key[0], key[0])
                known = self._stores[store] = _Store(login, source)
            by_store = self._due.setdefault(source, {})
            last = by_store.get(known)
            healthy = True if alone or last is None else last.healthy
            last_alone = seconds if alone or last is None else last.alone
            by_store[known] = _Due(
                known, statement, database, due_at, fresh_for, seconds, last_alone, healthy
            )

    def forget(self, store: StoreSource) -> None:
        """The store's reading failed, or is not kept: it is not read with others until
        it was read alone and kept again."""
        with self._lock:
            known = self._stores.get(store)
            if known is not None:
                self._due.get(known.source, {}).pop(known, None)
                self._early.pop(known, None)

    def _taken(self, store: _Store, statement: PackedStatement, now: float) -> Found | None:
        with self._lock:
            early = self._early.pop(store, None)
            due = self._due.get(store.source, {}).get(store)
        if early is None or due is None or not _same(early.statement, statement):
            return None
        if now - early.at >= due.fresh_for:
            return None
        return Found(early.row, early.at, early.share)

    def _batch_from(self, store: _Store, statement: PackedStatement, now: float) -> _Batch | None:
        """The store and up to `BATCH - 1` stores of its login whose reading of the same
        source comes due soonest, within `WINDOW_SHARE` of their interval, and whose
        statement answered quickly with as many values; None when there is no other."""
        with self._lock:
            self._tidy(now)
            if store in self._flying or store in self._early:
                return _TAKEN_MEANWHILE  # read in another round's batch since it looked
            by_store = self._due.get(store.source, {})
            own = by_store.get(store)
            if own is None or not own.healthy or own.seconds > FAST_SECONDS:
                return None  # unknown, or slow: read alone first
            login, width = store.login, statement.width
            flying, early = self._flying, self._early
            candidates = sorted(
                (
                    (due.due_at, due)
                    for due in by_store.values()
                    # The window first: most stores are not in it (a float compared).
                    if due.opens <= now < due.closes
                    and due is not own
                    and due.store.login is login
                    and due.healthy
                    and due.seconds <= FAST_SECONDS
                    and due.statement.width == width
                    and due.store not in flying
                    and due.store not in early
                ),
                key=lambda candidate: candidate[0],
            )
            members = [(store, statement, own.database)]
            usual = own.alone
            for _, due in candidates:
                if len(members) == self._batch or usual + due.alone > SLOW_BATCH_SECONDS:
                    break
                members.append((due.store, due.statement, due.database))
                usual += due.alone
            if len(members) < 2:
                return None
            batch = _Batch(members, usual)
            for member, _, _ in members:
                self._flying[member] = batch
            return batch

    def _land(
        self,
        batch: _Batch,
        rows: dict[int, Row] | None,
        seconds: float,
        now: float,
        *,
        blamed: bool,
    ) -> None:
        """The batch's rows kept for its other stores, or its stores marked to be read
        alone (a batch that failed on its stores, or a slow one); the rounds waiting for
        it woken."""
        share = seconds / len(batch.members)
        slow = seconds > max(FAST_SECONDS, min(SLOW_BATCH_FACTOR * batch.usual, SLOW_BATCH_SECONDS))
        with self._lock:
            for place, (member, statement, _) in enumerate(batch.members):
                if self._flying.get(member) is batch:
                    del self._flying[member]
                known = self._due.get(member.source, {}).get(member)
                if known is not None and ((rows is None and blamed) or slow):
                    known.healthy = False
                if rows is not None and place > 0:
                    self._early[member] = _Early(statement, rows[place], now, share)
            if rows is not None:
                self.batches += 1
        batch.done.set()

    def _tidy(self, now: float) -> None:
        """Under the lock, at most once a minute: forgets the rows no store can take any
        more, and the stores whose reading came due long ago and was not read again (a
        database dropped, a site removed), with their logins."""
        if now - self._tidied_at < 60.0:
            return
        self._tidied_at = now
        for store, early in list(self._early.items()):
            due = self._due.get(store.source, {}).get(store)
            if due is None or now - early.at >= due.fresh_for:
                del self._early[store]
        for by_store in self._due.values():
            for store, due in list(by_store.items()):
                if now - due.due_at > due.fresh_for + FORGET_SECONDS:
                    del by_store[store]
        kept = {store for by_store in self._due.values() for store in by_store}
        kept |= self._flying.keys()
        self._stores = {key: store for key, store in self._stores.items() if store in kept}
        logins = {store.login for store in self._stores.values()}
        self._logins = {login: login for login in self._logins if login in logins}


def _kept_as_alone(types: tuple[int, ...]) -> bool:
    """Whether a union's columns of these types give each branch's values as its own
    statement would (`_WHOLE_NUMBERS`, `_TEXTS`)."""
    return bool(types) and (set(types) <= _WHOLE_NUMBERS or set(types) <= _TEXTS)


def _same(kept: PackedStatement, asked: PackedStatement) -> bool:
    """Whether a row of `kept` answers `asked`: the same subqueries with the same
    arguments (most often the same object, made once: `sources.statement_parts`)."""
    return kept is asked or (kept.subqueries == asked.subqueries and kept.args == asked.args)


def _not_billed(_seconds: float) -> None:
    """A batch's time is billed to its stores in shares as they take their rows."""
