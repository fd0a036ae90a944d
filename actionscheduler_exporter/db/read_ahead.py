"""Hot statements of many stores of one server, read in one statement.

A thousand stores on a server cost a thousand hot statements per scrape, one per store,
and each costs the driver's parsing of its answer (in Python) and the server's work per
statement, whatever its size (docs/performance.md). Once a store's hot statement is
packed (`db.packed`), it is the same text from one round to the next while the store is
quiet: the store that asks first reads the answers of the next stores too, in one
`UNION ALL` of their packed statements, each branch tagged with its place; each of those
stores then takes its answer when its own round asks, if its statement is still the one
read (otherwise it sends its own).

Which stores come next is learnt from the order they asked in before (the rounds run in
the same order every scrape): those that asked after this store last time and have not
asked in this wave of rounds (those a scrape started). A round whose store is being read in another
round's batch reads the next stores' batch meanwhile, then takes its answer: the server's
connections each read a batch side by side, as they read one store each without this.

Only stores whose own statement answered quickly the last time are read with others, and
a batch that fails for any reason is sent again store by store, each store then sending
its own until it answered alone: a missing, locked or slow database delays the stores
read with it at most once, by the batch's lock wait of one second. An answer read ahead
is used within `MAX_AGE` seconds of its reading, or not at all: a store's values are
never older than that when its round reports them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from actionscheduler_exporter.db.packed import PackedStatement
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import in_database
from actionscheduler_exporter.db.session import Row, Session

# How many stores one statement reads: ten to twenty-five took the same time per store on
# the bench's server; more add to the wait of the first store of each batch.
BATCH = 16
# Seconds an answer read ahead stays usable: the rounds of one scrape, not the next one's.
MAX_AGE = 0.5
# A store whose last statement took longer is read alone: a slow store must not hold back
# the ones read with it.
FAST_SECONDS = 0.05
# Stores not asked for this long are forgotten (a database dropped, a site removed).
FORGET_SECONDS = 600.0
# A batch waits for a locked table one second at most, then each store is read alone,
# with the session's own lock wait: MariaDB sets it for one statement so, MySQL (8.0.3
# and later) with a hint in the first SELECT, which other servers read as a comment.
_MARIADB_LOCK_WAIT = "SET STATEMENT lock_wait_timeout = 1 FOR "
_MYSQL_LOCK_WAIT = "SELECT /*+ SET_VAR(lock_wait_timeout = 1) */ "

# A store's hot statement: who reads it (the login), where (host, port, socket,
# database), and the table prefix.
Key = tuple[object, ...]


@dataclass
class _Asked:
    """A store's last hot statement that answered, as sent, and when the store asks."""

    statement: PackedStatement
    args: tuple[object, ...]
    database: str
    seconds: float
    asked_at: float
    wave: float = 0.0  # the wave of rounds it last asked in (`query`)
    # False once a batch with it failed, until its statement answered alone.
    healthy: bool = True


@dataclass
class _Batch:
    members: list[tuple[Key, _Asked]]
    asker: Key | None  # the store of the round that sends it, if it is a member
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Answer:
    statement: PackedStatement
    args: tuple[object, ...]
    rows: list[Row]
    seconds: float  # the store's share of the batch's time
    at: float


class ReadAhead:
    """One per database server (its lane), shared by the rounds of all its stores."""

    def __init__(self, batch: int = BATCH) -> None:
        self._batch = batch
        self._lock = threading.Lock()
        self._asked: dict[Key, _Asked] = {}
        self._next: dict[Key, Key] = {}  # the store that asked after this one, last time
        self._previous: Key | None = None
        self._ready: dict[Key, _Answer] = {}
        self._flying: dict[Key, _Batch] = {}
        self._forgotten_at = time.monotonic()
        self.batches = 0  # statements that read more than one store (tests, benchmarks)

    def query(
        self,
        session: Session,
        key: Key,
        statement: PackedStatement,
        sql: str,
        args: tuple[object, ...],
        database: str,
        wave: float,
    ) -> tuple[list[Row], float]:
        """The rows of the store's packed statement `sql` and the seconds counted as its
        own: read ahead by another store's round, or now, with the stores that come next.
        `wave`: the same for the rounds one scrape started (their deadline's time). Raises
        QueryError as `Session.query` does for the store's own statement."""
        flying = self._take(key, wave)
        if flying is not None:
            # Another round reads this store: the next ones are read meanwhile.
            ahead = self._batch_from(key, None, wave)
            if ahead is not None:
                self._read(session, ahead)
            flying.done.wait(session.timeout)
        with self._lock:
            answer = self._ready.pop(key, None)
        own = _Asked(statement, args, database, 0.0, 0.0)
        if (
            answer is not None
            and time.monotonic() - answer.at <= MAX_AGE
            and answer.statement is statement
            and answer.args == args
        ):
            session.bill(answer.seconds)
            self._answered(key, own, answer.seconds)
            return answer.rows, answer.seconds
        batch = self._batch_from(key, own, wave)
        if batch is not None:
            by_place, seconds = self._read(session, batch)
            if by_place is not None:
                session.bill(seconds)
                self._answered(key, own, seconds)
                return [by_place[0]], seconds
        return self._read_alone(session, key, own, sql)

    def forget(self, key: Key) -> None:
        """The store's statement did not answer as expected (a malformed answer, an
        error): it is read alone until it answers again."""
        with self._lock:
            asked = self._asked.get(key)
            if asked is not None:
                asked.healthy = False

    def _take(self, key: Key, wave: float) -> _Batch | None:
        """Notes the ask (when, in which wave, after which store); the batch reading the
        store now, if another round sent one."""
        now = time.monotonic()
        with self._lock:
            asked = self._asked.get(key)
            if asked is not None:
                asked.asked_at, asked.wave = now, wave
            if self._previous is not None and self._previous != key:
                self._next[self._previous] = key
            self._previous = key
            return self._flying.get(key)

    def _batch_from(self, key: Key, own: _Asked | None, wave: float) -> _Batch | None:
        """The store (`own`, when it is read too) and up to `BATCH - 1` of those that asked
        after it last time and not in this wave, whose last statement answered quickly,
        marked as being read; None when there are none."""
        now = time.monotonic()
        with self._lock:
            self._forget_old(now)
            known = self._asked.get(key)
            if known is None or not known.healthy or known.seconds > FAST_SECONDS:
                return None
            members: list[tuple[Key, _Asked]] = [(key, own)] if own is not None else []
            seen = {key}
            candidate = self._next.get(key)
            steps = 0
            while candidate is not None and candidate not in seen and steps < 4 * self._batch:
                steps += 1
                seen.add(candidate)
                asked = self._asked.get(candidate)
                if (
                    asked is not None
                    and asked.healthy
                    and asked.wave != wave
                    and asked.seconds <= FAST_SECONDS
                    and candidate[0] == key[0]  # the same login: the same connection's
                    and candidate not in self._flying
                    and candidate not in self._ready
                ):
                    members.append((candidate, asked))
                    if len(members) == self._batch:
                        break
                candidate = self._next.get(candidate)
            if len(members) < 2:
                return None
            batch = _Batch(members, key if own is not None else None)
            for member, _ in members:
                self._flying[member] = batch
            return batch

    def _read(self, session: Session, batch: _Batch) -> tuple[dict[int, Row] | None, float]:
        """Every member's row by its place, and each one's share of the time; None when
        the batch failed: its members are then read alone until each answered. The answers
        of those not asking now are kept for their rounds."""
        parts: list[str] = []
        every_arg: list[object] = []
        for place, (_, asked) in enumerate(batch.members):
            branch, branch_args = in_database(
                asked.statement.branch(place), asked.args, asked.database
            )
            parts.append(branch)
            every_arg.extend(branch_args or ())
        sql = " UNION ALL ".join(parts)
        if "mariadb" in session.server_version.lower():
            sql = _MARIADB_LOCK_WAIT + sql
        else:
            sql = _MYSQL_LOCK_WAIT + sql.removeprefix("SELECT ")
        started = time.perf_counter()
        by_place: dict[int, Row] | None = None
        try:
            with session.billed_to(_not_billed):
                by_place = _by_place(session.query(sql, tuple(every_arg)), len(batch.members))
        except QueryError as error:
            if error.connection_lost:
                self._land(batch, None, 0.0)
                raise
        seconds = (time.perf_counter() - started) / len(batch.members)
        self._land(batch, by_place, seconds)
        return by_place, seconds

    def _land(self, batch: _Batch, by_place: dict[int, Row] | None, seconds: float) -> None:
        now = time.monotonic()
        with self._lock:
            if by_place is not None:
                self.batches += 1
            for place, (member, asked) in enumerate(batch.members):
                if self._flying.get(member) is batch:
                    del self._flying[member]
                if by_place is None:
                    known = self._asked.get(member)
                    if known is not None:
                        known.healthy = False
                elif member != batch.asker:
                    answer = _Answer(asked.statement, asked.args, [by_place[place]], seconds, now)
                    self._ready[member] = answer
        batch.done.set()

    def _read_alone(
        self, session: Session, key: Key, own: _Asked, sql: str
    ) -> tuple[list[Row], float]:
        started = time.perf_counter()
        try:
            rows = session.query(sql, own.args)
        except QueryError:
            self.forget(key)
            raise
        seconds = time.perf_counter() - started
        self._answered(key, own, seconds)
        return rows, seconds

    def _answered(self, key: Key, own: _Asked, seconds: float) -> None:
        """The store's statement answered in `seconds` (its share of a batch's): it may be
        read with others from now on."""
        now = time.monotonic()
        with self._lock:
            known = self._asked.get(key)
            if known is None:
                own.seconds, own.asked_at = seconds, now
                self._asked[key] = own
            else:
                known.statement, known.args, known.database = own.statement, own.args, own.database
                known.seconds, known.healthy = seconds, True

    def _forget_old(self, now: float) -> None:
        """Under the lock: drops stores not asked for `FORGET_SECONDS` and answers not
        taken in time, at most once a minute."""
        if now - self._forgotten_at < 60.0:
            return
        self._forgotten_at = now
        old = [key for key, asked in self._asked.items() if now - asked.asked_at > FORGET_SECONDS]
        for key in old:
            del self._asked[key]
            self._next.pop(key, None)
        for key, answer in list(self._ready.items()):
            if now - answer.at > MAX_AGE:
                del self._ready[key]


def _by_place(rows: list[Row], members: int) -> dict[int, Row] | None:
    """Each branch's one-column row by its place; None unless every branch answered once."""
    found: dict[int, Row] = {}
    for row in rows:
        if len(row) != 2 or not isinstance(row[0], int) or row[0] in found:
            return None
        found[row[0]] = (row[1],)
    return found if len(found) == members and all(p in found for p in range(members)) else None


def _not_billed(_seconds: float) -> None:
    """A batch's time is billed to its stores in shares, not to the store that sent it."""
