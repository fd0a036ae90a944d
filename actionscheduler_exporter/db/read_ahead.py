"""Hot statements of many stores of one server, read in one statement.

A thousand stores on a server cost a thousand hot statements per scrape, one per store,
and each costs the driver's parsing of its answer (in Python) and the server's work per
statement, whatever its size (docs/performance.md). Once a store's hot statement is
packed (`db.packed`), it is the same text from one round to the next while the store is
quiet: the store that asks first reads the answers of the next stores too, in one
`UNION ALL` of their statements in columns, each branch tagged with its place (stores
whose answers have the same types: `PackedStatement.shape`); each of those stores then
takes its answer when its own round asks, if its statement is still the one read
(otherwise it sends its own).

Which stores come next is learnt from the order they asked in before (the rounds run in
the same order every scrape): those that asked after this store last time and have not
asked in this wave of rounds (those a scrape started). A round whose store is being read
in another round's batch reads the next stores' batch meanwhile, then takes its answer:
the server's connections each read a batch side by side, as they read one store each
without this. A round that takes an answer read ahead, at the second place of its batch
or past its middle, has the next stores read then (while fewer than `MOST_FLYING`
batches are being read): the server reads while the rounds make their samples.

Only stores whose own statement answered quickly the last time (against the server's
other stores, on a loaded machine: `FAST_SECONDS`) are read with others, and
a batch that fails for any reason is sent again store by store, each store then sending
its own until it answered alone; so is every store of a batch that took several times
what its stores took when they were last read alone (or a quarter of a second): a
missing, locked or slow database delays the stores read with it once, by the batch's lock
wait of one second at most. A machine that slows down as a whole slows every batch with
its stores, and keeps them together.

An answer is used only if it was read at most `MAX_AGE` seconds before its store asked:
a store's values are never older than that when its round reports them.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

from actionscheduler_exporter.db.packed import PackedStatement, Shape
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.session import Row, Session
from actionscheduler_exporter.db.union import rows_by_place, union_statement

# How many stores one statement reads: ten to twenty-five took the same time per store on
# the bench's server; more add to the wait of the first store of each batch.
BATCH = 16
# Seconds before its store asks that an answer may have been read: the rounds of one
# scrape, not the next one's.
MAX_AGE = 0.5
# A store whose last statement took longer is read alone: a slow store must not hold back
# the ones read with it. On a server slowed as a whole (a loaded machine) the bound is
# SLOW_BATCH_FACTOR times its stores' median, up to SLOW_BATCH_SECONDS: else every store
# of a loaded machine was read alone from its first slow batch on, sending the server a
# statement per store when it had the least to spare.
FAST_SECONDS = 0.05
# A batch is slow when it took longer than FAST_SECONDS and than this many times what its
# stores took when each was last read alone, added up: one of them grew slow or waited
# for a lock. Its stores are then read alone once, each timed on its own (a store's share
# of a batch hides which one was slow). Not 50 ms alone: on a loaded machine a batch of
# sixteen took longer while none of its stores was slow, and was read apart every other
# scrape, sending the server more statements when it had the least to spare. Not their
# last shares either: a store that slows down a little at each scrape would raise its
# batch's shares with it, and never be found.
SLOW_BATCH_FACTOR = 4.0
# However long its stores took alone, a batch that takes longer holds them back too long.
SLOW_BATCH_SECONDS = 0.25
# A round that takes its answer from a batch at its second place, or past its middle,
# has the next stores not read nor being read read then, while fewer than this many
# batches are being read: the server reads ahead while the rounds make the samples of
# what it read. Without, it waited idle until a round found its store not read: a
# thousand stores' rounds kept 1.5 statements running on average (0 in a third of the
# time) for 1.5 cores busy of 2 (docs/performance.md).
MOST_FLYING = 3
# Stores not asked for this long are forgotten (a database dropped, a site removed).
FORGET_SECONDS = 600.0

# A store's hot statement: who reads it (the login), where (host, port, socket,
# database), and the table prefix.
Key = tuple[object, ...]


class _StoreId:
    """A store as the read-ahead knows it: made at its first ask and kept while it asks,
    then hashed and compared by identity at every step of a batch's making (the key, with
    the login's TLS settings in it, took a Python call to hash each time: a tenth of the
    read-ahead's time for a thousand stores). `login` is shared by the stores of one
    login; `asked_at`: when it last asked."""

    __slots__ = ("asked_at", "login")

    def __init__(self, login: object, asked_at: float) -> None:
        self.login = login
        self.asked_at = asked_at


@dataclass(frozen=True)
class _Ask:
    """What a store's round asks for: its packed statement (with its arguments), the
    database its tables are in, and the types of its answer (`PackedStatement.shape`)."""

    statement: PackedStatement
    database: str
    shape: Shape | None


@dataclass
class _Store:
    """What is known of a store: its last statement that answered, and its asks."""

    ask: _Ask
    seconds: float  # its statement's time, or its share of a batch's
    alone: float  # its statement's time when it was last read alone
    wave: float  # the wave of rounds it last asked in
    # False after a failed or slow batch with it, until its statement answered alone.
    healthy: bool = True


@dataclass
class _Batch:
    members: list[tuple[_StoreId, _Ask]]  # as they were when the batch was made
    sender: _StoreId | None  # the store of the round that sends it, if it is a member
    shape: Shape  # the types of each member's answer
    usual: float  # its members' last times alone, added up
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Answer:
    statement: PackedStatement
    row: Row  # in columns
    seconds: float  # the store's share of the batch's time
    at: float
    place: int  # in its batch


class ReadAhead:
    """One per database server (its lane), shared by the rounds of all its stores."""

    def __init__(self, batch: int = BATCH) -> None:
        self._batch = batch
        self._look_ahead_at = frozenset({1, batch // 2 + 1})  # places in a batch
        self._lock = threading.Lock()
        self._ids: dict[Key, _StoreId] = {}
        self._logins: dict[object, object] = {}  # each login once, for `_StoreId.login`
        self._stores: dict[_StoreId, _Store] = {}
        self._next: dict[_StoreId, _StoreId] = {}  # who asked after this one, last time
        self._previous: _StoreId | None = None
        self._ready: dict[_StoreId, _Answer] = {}
        self._flying: dict[_StoreId, _Batch] = {}
        self._batches_flying = 0
        self._tidied_at = time.monotonic()
        self.batches = 0  # statements that read more than one store (tests, benchmarks)
        self.taken = 0  # answers taken by `take` (tests, benchmarks)
        # The longest a store's last statement may have taken for it to be read with
        # others, and the wave it was made for (`_fast_bound`).
        self._fast: tuple[float, float | None] = (FAST_SECONDS, None)

    def query(
        self,
        session: Session,
        key: Key,
        statement: PackedStatement,
        sql: str,
        database: str,
        wave: float,
    ) -> tuple[Row | None, float]:
        """The values of the store's packed statement `sql` (sent with `statement.args`),
        as in columns, and the seconds counted as its own: read ahead by another store's
        round, or now, with the stores that come next. None: its packed answer, read
        alone, could not be one (the statement is then sent in columns there, outside the
        read-ahead: `PackedStatement.unpack`). `wave`: the same for the rounds one scrape
        started (their deadline's time). Raises QueryError as `Session.query` does for
        the store's own statement."""
        ask = _Ask(statement, database, statement.shape(session.endpoint))
        store, flying = self._note_ask(key, wave)
        asked_at = store.asked_at
        if flying is not None:
            # Another round reads this store: the next ones are read meanwhile.
            ahead = self._batch_from(store, None, wave) if session.try_open() else None
            if ahead is not None:
                self._read(session, ahead)
            flying.done.wait(session.timeout)
        taken = self._take(session, store, ask, asked_at, wave)
        if taken is not None:
            return taken
        session.ready()  # its own statement is sent: its time is not the wait for a connection
        batch = self._batch_from(store, ask, wave)
        if batch is not None:
            by_place, seconds = self._read(session, batch)
            if by_place is not None:
                session.bill(seconds)
                self._answered(store, ask, seconds, wave, alone=False)
                return by_place[0], seconds
        rows, seconds = self._read_alone(session, store, ask, sql, wave)
        values = statement.unpack(session.endpoint, rows)
        if values is None:
            self._isolate(store)
        return values, seconds

    def take(
        self, session: Session, key: Key, statement: PackedStatement, database: str, wave: float
    ) -> tuple[Row, float] | None:
        """The store's answer that another round's batch read ahead for `statement`, and
        the seconds counted as its own, taken as `query` takes it; None, with nothing
        noted nor sent, when none is ready (`query` then reads it)."""
        with self._lock:
            store = self._ids.get(key)
            answer = None if store is None else self._ready.get(store)
            known = None if store is None else self._stores.get(store)
        if store is None or answer is None or answer.statement is not statement:
            return None
        if answer.at < time.monotonic() - MAX_AGE:
            return None
        ask = known.ask if known is not None else None  # most ask for the same every round
        if ask is None or ask.statement is not statement or ask.database != database:
            ask = _Ask(statement, database, statement.shape(session.endpoint))
        self._note_ask(key, wave)
        taken = self._take(session, store, ask, store.asked_at, wave)
        self.taken += taken is not None
        return taken

    def _take(
        self, session: Session, store: _StoreId, ask: _Ask, asked_at: float, wave: float
    ) -> tuple[Row, float] | None:
        """The store's answer read ahead, if it is `ask`'s and was read at most `MAX_AGE`
        before the store asked (at `asked_at`), taken: billed, noted, and the next stores
        read then when it was at a place that looks ahead."""
        with self._lock:
            answer = self._ready.pop(store, None)
            looks_ahead = (
                answer is not None
                and answer.place in self._look_ahead_at
                and self._batches_flying < MOST_FLYING
            )
        if (
            answer is None
            or answer.statement is not ask.statement
            or answer.at < asked_at - MAX_AGE
        ):
            return None
        session.bill(answer.seconds)
        self._answered(store, ask, answer.seconds, wave, alone=False)
        if looks_ahead and session.try_open():
            # The server reads the next stores while the other rounds make these stores'
            # samples: else it waits idle until a round finds none read. A whole batch
            # only: smaller ones sent ahead broke the next into more statements (81
            # against 71 per scrape of a thousand stores). On a connection taken first: a
            # batch's time and its members' health must not hold the wait for one (a
            # round that took its answer holds none).
            ahead = self._batch_from(store, None, wave, least=self._batch)
            if ahead is not None:
                self._read(session, ahead)
        return answer.row, answer.seconds

    def answered_ahead(self, key: Key) -> bool:
        """Whether the store's answer was read in another round's batch and waits for its
        round: taking it needs no connection."""
        with self._lock:
            store = self._ids.get(key)
            return store is not None and store in self._ready

    def _isolate(self, key: _StoreId) -> None:
        """The store's statement did not answer as expected (a malformed answer, an
        error): it is read alone until it answers again."""
        with self._lock:
            store = self._stores.get(key)
            if store is not None:
                store.healthy = False

    def _note_ask(self, key: Key, wave: float) -> tuple[_StoreId, _Batch | None]:
        """Notes the ask (when, in which wave, after which store): the store's id (made at
        its first ask, `key[0]` its login; the same while it asks, as `_tidy` forgets only
        those that stopped), and the batch reading the store now, if another round sent
        one."""
        now = time.monotonic()
        with self._lock:
            store = self._ids.get(key)
            if store is None:
                login = self._logins.setdefault(key[0], key[0])
                store = self._ids[key] = _StoreId(login, now)
            store.asked_at = now
            known = self._stores.get(store)
            if known is not None:
                known.wave = wave
            if self._previous is not None and self._previous is not store:
                self._next[self._previous] = store
            self._previous = store
            return store, self._flying.get(store)

    def _batch_from(
        self, key: _StoreId, own: _Ask | None, wave: float, least: int = 2
    ) -> _Batch | None:
        """The store (`own`, when it is read too) and up to `BATCH - 1` of those that asked
        after it last time and not in this wave, whose last statement answered quickly
        with answers of the same types, marked as being read; None when there are fewer
        than `least` in all."""
        now = time.monotonic()
        with self._lock:
            self._tidy(now)
            known = self._stores.get(key)
            fast = self._fast_bound(wave)
            if known is None or not known.healthy or known.seconds > fast:
                return None
            shape = (own or known.ask).shape
            if shape is None:
                return None
            members: list[tuple[_StoreId, _Ask]] = [(key, own)] if own is not None else []
            usual = known.alone if own is not None else 0.0
            seen = {key}
            candidate = self._next.get(key)
            steps = 0
            while candidate is not None and candidate not in seen and steps < 4 * self._batch:
                steps += 1
                seen.add(candidate)
                store = self._stores.get(candidate)
                if (
                    store is not None
                    and store.healthy
                    and store.wave != wave
                    and store.seconds <= fast
                    # A batch longer than that is slow whatever its stores took alone.
                    and usual + store.alone <= SLOW_BATCH_SECONDS
                    and candidate.login is key.login  # the same login: the same connection's
                    and store.ask.shape == shape
                    and candidate not in self._flying
                    and candidate not in self._ready
                ):
                    members.append((candidate, store.ask))
                    usual += store.alone
                    if len(members) == self._batch:
                        break
                candidate = self._next.get(candidate)
            if len(members) < least:
                return None
            batch = _Batch(members, key if own is not None else None, shape, usual)
            for member, _ in members:
                self._flying[member] = batch
            self._batches_flying += 1
            return batch

    def _fast_bound(self, wave: float) -> float:
        """Under the lock: FAST_SECONDS, or SLOW_BATCH_FACTOR times the median of the
        stores' last times (their own, or their shares of a batch) when that is longer,
        up to SLOW_BATCH_SECONDS; made once per wave."""
        bound, made_for = self._fast
        if made_for != wave:
            median = statistics.median([s.seconds for s in self._stores.values()] or [0.0])
            bound = max(FAST_SECONDS, min(SLOW_BATCH_FACTOR * median, SLOW_BATCH_SECONDS))
            self._fast = (bound, wave)
        return bound

    def _read(self, session: Session, batch: _Batch) -> tuple[dict[int, Row] | None, float]:
        """Every member's row by its place, and each one's share of the time; None when
        the batch failed (its time is then the sender's). Whatever happens, the batch
        lands: its members' answers kept for their rounds, or its members marked to be
        read alone, and the rounds waiting for it woken."""
        started = time.perf_counter()
        by_place: dict[int, Row] | None = None
        try:
            members = [(ask.statement, ask.database) for _, ask in batch.members]
            sql, every_arg = union_statement(session.server_version, members)
            with session.billed_to(_not_billed):
                rows, types = session.query_typed(sql, every_arg)
                # The types of the union itself: a signed and an unsigned whole number,
                # one code apart, make a decimal of both.
                if types[1:] == batch.shape:
                    by_place = rows_by_place(rows, len(batch.members), len(batch.shape))
        except QueryError as error:
            if error.connection_lost:
                raise
        finally:
            seconds = time.perf_counter() - started
            self._land(batch, by_place, seconds)
        if by_place is None:
            session.bill(seconds)
            return None, seconds
        self.batches += 1
        return by_place, seconds / len(batch.members)

    def _land(self, batch: _Batch, by_place: dict[int, Row] | None, seconds: float) -> None:
        now = time.monotonic()
        share = seconds / len(batch.members)
        slow = seconds > max(FAST_SECONDS, min(SLOW_BATCH_FACTOR * batch.usual, SLOW_BATCH_SECONDS))
        with self._lock:
            for place, (member, ask) in enumerate(batch.members):
                if self._flying.get(member) is batch:
                    del self._flying[member]
                store = self._stores.get(member)
                if store is not None and (by_place is None or slow):
                    store.healthy = False
                if by_place is not None and member != batch.sender:
                    self._ready[member] = _Answer(ask.statement, by_place[place], share, now, place)
            self._batches_flying -= 1
        batch.done.set()

    def _read_alone(
        self, session: Session, key: _StoreId, ask: _Ask, sql: str, wave: float
    ) -> tuple[list[Row], float]:
        started = time.perf_counter()
        try:
            rows = session.query(sql, ask.statement.args)
        except QueryError:
            self._isolate(key)
            raise
        seconds = time.perf_counter() - started
        self._answered(key, ask, seconds, wave, alone=True)
        return rows, seconds

    def _answered(
        self, key: _StoreId, ask: _Ask, seconds: float, wave: float, *, alone: bool
    ) -> None:
        """The store's statement answered in `seconds` (its share of a batch's) in `wave`;
        read `alone`, it may be read with others again."""
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                self._stores[key] = _Store(ask, seconds, seconds, wave)
                return
            store.ask, store.seconds = ask, seconds
            if alone:
                store.alone = seconds
                store.healthy = True

    def _tidy(self, now: float) -> None:
        """Under the lock, at most once a minute: forgets the stores not asked for
        `FORGET_SECONDS` and the answers not taken in time."""
        if now - self._tidied_at < 60.0:
            return
        self._tidied_at = now
        for raw, known in list(self._ids.items()):
            if now - known.asked_at > FORGET_SECONDS:
                del self._ids[raw]
                self._stores.pop(known, None)
        logins = {known.login for known in self._ids.values()}
        self._logins = {login: login for login in self._logins if login in logins}
        for key in [key for key in self._next if key not in self._stores]:
            del self._next[key]
        for key in [key for key, answer in self._ready.items() if now - answer.at > MAX_AGE]:
            del self._ready[key]


def _not_billed(_seconds: float) -> None:
    """A batch's time is billed to its stores in shares as they take their answers, not
    to the store that sent it."""
