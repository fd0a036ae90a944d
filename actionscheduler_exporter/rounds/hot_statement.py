"""The round's one statement per table prefix: the tables' statistics (when due) and the
`columns` of every hot collector read in the round, in one round trip.

On a small store a statement costs its round trip and the server's and the driver's work
per statement, not rows: a thousand sites' scrape sent five of them per site. One
statement of scalar subqueries instead, split back into each collector's values. When it
fails for any reason but a lost connection, nothing is lost: the statistics are read on
their own and each collector reads its own columns, so a failure is the failing
collector's alone (a lock wait, though, stops the rest of the prefix: see `MonitoredSite`).

The express read. Most stores of a server are read several in one statement
(`db.read_ahead`): a store's round finds its answer ready, and its work is to make its
samples of it. The normal read of a prefix decides again at every round what the
statement is made of, which statistics it carries and whether a connection is needed;
for a store whose answer is ready, that frame cost more than its samples
(docs/performance.md, "The express read"). `ExpressPlans` keeps what a prefix's last
normal read decided: the statement and where each collector's values are in its answer,
the kept statistics it was read with, the store's key in the read-ahead, its label and
its meter. The next rounds take the answer with that plan while it holds (an answer read
ahead for the plan's statement, the statistics kept and not due, the session connected
before and not lost); anything else drops it, and the normal read runs and makes it again.
What the collectors make of the values is the collectors loop's, either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.pool import reader_of
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.read_ahead import Key, ReadAhead
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Row, Session
from actionscheduler_exporter.db.tables import (
    TableStats,
    read_table_stats,
    table_stats_column,
)
from actionscheduler_exporter.sources.database import (
    Collector,
    Columns,
    DatabaseContext,
)
from actionscheduler_exporter.sources.statement_parts import (
    StatementPlan,
    made_of,
    split,
)


@dataclass(frozen=True, slots=True)
class PrefixPlan:
    """What a prefix's last normal read decided, for its express reads."""

    statement: StatementPlan
    stats: Mapping[str, TableStats]  # the kept statistics it was read with
    tables: TableNames
    key: Key  # the store in the server's read-ahead
    database: str
    label: str
    meter: Callable[[float], None]  # the label's database time of the hot tier


# Off only in the test that reads the same stores both ways.
EXPRESS = True


class ExpressPlans:
    """Each prefix's plan for its express reads, while it holds (see the module's
    docstring); one site's, kept between its rounds (`SiteState`)."""

    def __init__(self) -> None:
        self._plans: dict[str, PrefixPlan] = {}

    def keep(
        self,
        prefix: str,
        statement: HotStatement,
        kept: tuple[float, Mapping[str, TableStats]] | None,
        made: tuple[TableNames, Key, str, str, Callable[[float], None]],
    ) -> None:
        """After a normal read's hot statement: its plan (`made` of the prefix's tables,
        the store's key and database, its label and meter), when it was read through the
        read-ahead with the statistics `kept` for the prefix; else none, and the next
        read is a normal one."""
        if statement.plan is None or kept is None or statement.stats is not kept[1]:
            self._plans.pop(prefix, None)
            return
        self._plans[prefix] = PrefixPlan(statement.plan, kept[1], *made)

    def take(
        self,
        prefix: str,
        session: Session,
        read_ahead: ReadAhead,
        kept: tuple[float, Mapping[str, TableStats]] | None,
        now: float,
        wave: float,
    ) -> tuple[PrefixPlan, dict[str, Row], float] | None:
        """The prefix's plan, its collectors' values read ahead for it in the `wave` of
        rounds, and their seconds (billed to its meter); None when the plan does not
        hold (then it is dropped), with nothing taken unless the answer could not be
        one. `kept`: the prefix's statistics and until when (clock time) they are.
        Raises QueryError when the connection is lost reading the next stores ahead."""
        plan = self._plans.get(prefix)
        if plan is None or not EXPRESS:
            return None
        if (
            kept is None
            or kept[1] is not plan.stats
            or now >= kept[0]
            or not session.has_connected
            or session.lost
        ):
            self._plans.pop(prefix, None)
            return None
        outer = session.billing(plan.meter)
        try:
            statement = plan.statement.statement
            taken = read_ahead.take(session, plan.key, statement, plan.database, wave)
        except QueryError:  # lost reading the next stores ahead: the caller fails the prefix
            self._plans.pop(prefix, None)
            raise
        finally:
            session.billing(outer)
        values = None if taken is None else plan.statement.values(taken[0], plan.tables)
        if taken is None or values is None:
            self._plans.pop(prefix, None)
            return None
        return plan, values, taken[1]

    def retain(self, prefixes: Collection[str]) -> None:
        """Forgets the plans of prefixes not in `prefixes` (a network's subsites gone)."""
        for gone in self._plans.keys() - set(prefixes):
            del self._plans[gone]


@dataclass
class HotStatement:
    # The tables' statistics by short name; None when they could not be read (`stats_error`).
    stats: Mapping[str, TableStats] | None
    # The collectors' values, by name; empty when the statement failed.
    prefetched: dict[str, Row] = field(default_factory=dict)
    seconds: float = 0.0  # the statement's time, shared by the collectors it served
    stats_error: QueryError | None = None
    # Whether a statement was sent at all (not when every value was known already).
    asked: bool = True
    # The statement as read through the read-ahead with known statistics, for the
    # store's express reads (`ExpressPlans`); None when it was not so read.
    plan: StatementPlan | None = None

    def share(self, collector: str) -> float:
        """The part of the statement's time that counts as the collector's duration."""
        if collector not in self.prefetched:
            return 0.0
        return self.seconds / len(self.prefetched)


def read_hot_statement(
    context: DatabaseContext,
    collectors: Sequence[Collector],
    known_stats: Mapping[str, TableStats] | None,
    ahead: StoreAhead | None = None,
    wave: float = 0.0,
) -> HotStatement:
    """The prefix's statistics (`known_stats` when its network's listing read them) and
    the collectors' columns; once packed, through the server's read-ahead (`ahead`: the
    stores of a server read several at a time) when there is one, in the `wave` of
    rounds of one scrape. Raises QueryError only when the connection is lost. An answer that cannot
    be one (a killed statement's row of NULLs, a statistics text cut short) is not used:
    everything is read apart, as after a failed statement."""
    session, tables = context.session, context.tables
    parts: list[tuple[str, Columns]] = []
    for collector in collectors:
        columns = collector.columns(context)
        if columns is not None:
            parts.append((collector.name, columns))
    every = [columns for _, columns in parts]
    if known_stats is None:
        stats_query, stats_args = table_stats_column(tables)
        every.insert(0, Columns((stats_query,), stats_args))
    if not every:
        return HotStatement(known_stats or {}, asked=False)
    statement, places = made_of(every)
    endpoint = session.endpoint
    packed = statement.packed(endpoint)
    if packed is None or ahead is None:
        session.ready()  # its time is the statement's, not the wait for a connection
    started = time.perf_counter()
    seconds: float | None = None  # a share of a statement read for several stores
    try:
        if packed is not None:
            if ahead is None:
                values = statement.unpack(endpoint, session.query(packed, statement.args))
            else:
                read_ahead, key = ahead
                values, seconds = read_ahead.query(
                    session, key, statement, packed, context.site.database, wave
                )
            rows = [] if values is None else [values]
        else:
            rows, types = session.query_typed(statement.sql, statement.args)
            if len(rows) == 1:
                statement.learn(endpoint, types)
    except QueryError as error:
        if error.connection_lost:
            raise
        return read_apart(context, known_stats)
    if seconds is None:
        seconds = time.perf_counter() - started
    answer = (
        split(rows, statement.width, parts, places, tables, known_stats) if len(rows) == 1 else None
    )
    if answer is None:
        return read_apart(context, known_stats)
    stats, prefetched = answer
    plan = None
    if ahead is not None and known_stats is not None and packed is not None:
        plan = StatementPlan(statement, tuple(parts), places)
    return HotStatement(stats, prefetched, seconds, plan=plan)


# The server's read-ahead and a store as it knows it: who reads it (the login), where
# (host, port, socket, database), and its table prefix; made once per store and round.
StoreAhead = tuple[ReadAhead, Key]


def store_ahead(
    read_ahead: ReadAhead, site: SiteConfig, session: Session, prefix: str
) -> StoreAhead:
    return read_ahead, (reader_of(site), session.endpoint, prefix)


def answered_ahead(ahead: StoreAhead) -> bool:
    """Whether the store's hot statement was answered in another store's batch
    (`ReadAhead.answered_ahead`)."""
    read_ahead, key = ahead
    return read_ahead.answered_ahead(key)


def read_apart(
    context: DatabaseContext, known_stats: Mapping[str, TableStats] | None
) -> HotStatement:
    """Each collector reads its own columns later (a failure is the failing one's alone);
    the statistics are read now. Statistics that fail without losing the connection fail
    the tables' collector only: the tables may well be there."""
    if known_stats is not None:
        return HotStatement(known_stats)
    try:
        return HotStatement(read_table_stats(context.session, context.tables))
    except QueryError as error:
        if error.connection_lost:
            raise
        return HotStatement(None, stats_error=error)
