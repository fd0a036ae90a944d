"""The database work of one round of one site, over its table prefixes.

For each prefix (one, or every subsite of a `table_prefix: auto` network, read side by
side on the server's connections), the round sends the hot statement (the columns of
every hot collector that is read in this round, at once: a cached one served from its
last reading is left out; `rounds.hot_statement`; the tables' statistics when they are
due, with other stores' of the server through `CachedRefresh`, else in it), then reads
each in-round collector in order, recording every reading in the prefix's report as it
arrives (`rounds.collectors_loop`); the heavy tier's samples are added when the prefixes
are read. A lost connection ends the prefix's reading and marks it down. A store whose
hot statement another round's batch answered borrows a connection only if a collector
sends a statement of its own; while its plan holds, it takes that answer without the
normal read's frame (the express read: `rounds.hot_statement.ExpressPlans`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Collection, Iterator, Mapping
from concurrent.futures import wait

from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import TABLES, table_names
from actionscheduler_exporter.db.session import Row, Session
from actionscheduler_exporter.db.tables import (
    TableStats,
    database_visible,
    discover_prefixes,
    list_prefixes,
)
from actionscheduler_exporter.errors import unexpected
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.rounds.collectors_loop import CollectorsLoop
from actionscheduler_exporter.rounds.hot_statement import (
    HotStatement,
    PrefixPlan,
    StoreAhead,
    answered_ahead,
    read_apart,
    read_hot_statement,
    store_ahead,
)
from actionscheduler_exporter.rounds.report import Failure, PrefixReport, RoundReports
from actionscheduler_exporter.rounds.site_state import SiteState
from actionscheduler_exporter.sources.cached_readings import KeptRow, stagger
from actionscheduler_exporter.sources.database import DatabaseContext
from actionscheduler_exporter.sources.source import Reading
from actionscheduler_exporter.timing import Deadline

# Seconds a prefix's table statistics are reused (each prefix at its own point, 0.75 to
# 1.25 times it), as long as the heavy tier's default interval: estimates that InnoDB
# refreshes lazily (MySQL 8 caches them for a day), and the floor of a thousand sites'
# scrape does not read them. Read in its hot statement, a store whose statistics are due
# sent its statement alone (their text is not packed, nor read with other stores'): at
# 60 s, a thousand stores' exporter past its first minutes sent 109 statements per scrape
# instead of 91, with a tenth more CPU (docs/performance.md); so they are read with the
# stores' of the server whose statistics come due soon, when they can be
# (`db.refresh_together`). A table gone meanwhile fails the hot statement, which then
# reads them again at once.
TABLE_STATS_INTERVAL = 300.0


class DatabaseRound:
    def __init__(self, state: SiteState, reports: RoundReports, deadline: Deadline) -> None:
        self._state = state
        self._reports = reports
        self._deadline = deadline
        # The rounds one scrape started share it (`db.read_ahead`).
        self._wave = deadline.at
        self._collectors = CollectorsLoop(state, deadline)

    def run(self) -> None:
        """Reads every prefix. Whatever a prefix's answers look like, the round ends with a
        report for each label it reached: an answer that breaks the round's own code (a
        value of a type no statement returns) fails the labels not reported yet."""
        started = self._state.clock()
        try:
            self._run()
        except QueryError:
            raise
        except Exception as error:
            problem = f"the round stopped on an answer that did not fit: {unexpected(error)}"
            for label in self._state.known_labels():
                if not self._reports.has(label):
                    self._fail(PrefixReport(label, started), Failure("malformed", problem))

    def _run(self) -> None:
        state = self._state
        started = state.clock()
        try:
            prefixes = self._prefixes()
        except QueryError as error:
            self._all_fail(Failure(error.kind, error.message), started)
            return
        if not prefixes and state.others_prefixes:
            return  # every subsite of the network is served by another shard
        if not prefixes:
            problem = f"no table named *actionscheduler_actions in database {state.site.database}"
            self._all_fail(Failure("missing_table", problem), started)
            return
        if state.discovers:  # a single site's one prefix stays
            state.cache.retain(prefixes)
            state.repeated.retain(prefixes)
            for collector in state.in_round:
                collector.retain(prefixes)
            for gone in state.kept_stats.keys() - set(prefixes):
                del state.kept_stats[gone]
            state.plans.retain(prefixes)
        if len(prefixes) > 1:
            self._read_in_lane(prefixes)
        else:
            self._read_prefixes(iter(prefixes), state.session)
        # Before waiting for the heavy tier, which may need a connection of the same pool.
        state.session.release()
        if state.heavy is not None:
            answered = self._reports.answered()
            heavy = state.heavy.samples(answered, self._deadline)
            for prefix, label in answered.items():
                self._reports.get(label).add_heavy(
                    heavy.get(prefix, []), state.heavy.problems(prefix)
                )

    def _prefixes(self) -> list[str]:
        state = self._state
        if state.discovers:
            # The statistics of every subsite in one listing when none are kept (the first
            # round); after it each prefix's are read with its statement about every
            # five minutes, as a single site's, and the listing names the prefixes alone.
            if state.kept_stats:
                found: Collection[str] = list_prefixes(state.session)
                # A first listing's statistics that no round used (a subsite not reached
                # then) are not used later, when they may be old.
                state.discovered_stats = {}
            else:
                found = state.discovered_stats = discover_prefixes(state.session)
            state.known_prefixes = [p for p in found if state.shard.owns(state.site_label(p))]
            state.others_prefixes = len(found) - len(state.known_prefixes)
            state.ledgers.keep(state.known_prefixes)
        return state.known_prefixes

    def _read_prefixes(self, prefixes: Iterator[str], session: Session) -> None:
        """Reads the prefixes one after the other on one session; once its connection is
        lost, the rest are reported down at once instead of each waiting to reconnect."""
        lost = False
        for prefix in prefixes:
            if lost:
                failure = Failure("connect", "the connection was lost earlier in this round")
                label = self._state.site_label(prefix)
                self._fail(PrefixReport(label, self._state.clock(), prefix), failure)
                continue
            try:
                self._read_prefix(prefix, session)
            except Exception as error:
                # One subsite's answer that breaks the round fails that subsite alone.
                problem = f"an answer that did not fit: {unexpected(error)}"
                label = self._state.site_label(prefix)
                self._fail(
                    PrefixReport(label, self._state.clock(), prefix), Failure("malformed", problem)
                )
            lost = session.lost

    def _read_in_lane(self, prefixes: list[str]) -> None:
        """A network's subsites side by side on the threads and connections of the site's
        lane (one after the other on the site's session when it has none); those no
        worker reaches in time are left out of the reports: not reached."""
        lane, session = self._state.lane, self._state.session
        if lane is None:
            self._read_prefixes(iter(prefixes), session)
            return
        session.release()  # each worker borrows its own
        pending = iter(prefixes)
        lock = threading.Lock()

        def next_prefixes() -> Iterator[str]:
            while not self._deadline.passed():
                with lock:
                    prefix = next(pending, None)
                if prefix is None:
                    return
                yield prefix

        def work() -> None:
            session = Session(self._state.site, pool=lane.pool)
            try:
                self._read_prefixes(next_prefixes(), session)
            finally:
                session.release()

        workers = [lane.prefixes.submit(work) for _ in range(min(lane.pool.size, len(prefixes)))]
        wait(workers, timeout=self._deadline.left())

    def _read_prefix(self, prefix: str, session: Session) -> None:
        state = self._state
        started = state.clock()
        lane, kept, plans = state.lane, state.kept_stats.get(prefix), state.plans
        try:
            express = (
                None
                if lane is None
                else plans.take(prefix, session, lane.read_ahead, kept, started, self._wave)
            )
        except QueryError as error:  # lost reading the next stores: as in `_hot_statement`
            report = PrefixReport(state.site_label(prefix), started, prefix)
            report.can_write = session.can_write
            self._fail(report, Failure(error.kind, error.message))
            return
        if express is not None:
            self._read_express(prefix, session, started, *express)
            return
        label = state.site_label(prefix)
        report = PrefixReport(label, started, prefix)
        tables = table_names(prefix)
        earlier: dict[str, Reading] = {}
        # Walked only when the heavy collectors are read in the round (heavy_interval 0).
        totals = state.ledgers.walk(prefix, session, tables) if state.heavy_in_round else None
        context = DatabaseContext(session, tables, state.site, {}, totals=totals, earlier=earlier)
        meter = state.reader.counters.meter(label, catalog.DATABASE_SECONDS, "hot")
        ahead = None if lane is None else store_ahead(lane.read_ahead, state.site, session, prefix)
        if not self._answered_ahead(ahead, session):
            try:
                with session.billed_to(meter):
                    session.open()
            except QueryError as error:
                self._fail(report, Failure(error.kind, error.message))
                return
        # The database answered (for this store, or in another round's batch with it):
        # from here on a scrape that stops waiting sees the report.
        report.can_write = session.can_write
        self._reports.put(report)
        # Cached readings still served are decided once: their columns stay out of the
        # hot statement (what the floor does not read is read less often).
        served = self._collectors.served_from_cache(prefix, context)
        try:
            with session.billed_to(meter):
                # A network's subsites: read with the prefixes, in one statement per round.
                statement = self._hot_statement(prefix, context, served, ahead)
        except QueryError as error:
            self._fail(report, Failure(error.kind, error.message))
            return
        if ahead is not None:
            made = (tables, ahead[1], state.site.database, label, meter)
            state.plans.keep(prefix, statement, state.kept_stats.get(prefix), made)
        stats = statement.stats
        if stats is not None and stats.keys() >= _EVERY_TABLE:  # the common case, in C
            report.add(_tables_exist(_EVERY_TABLE_FOUND))
        elif stats is not None:
            report.add(_tables_exist(tuple(table in stats for table in TABLES)))
            missing = [tables.name(table) for table in TABLES if table not in stats]
            if len(missing) == len(TABLES) and not database_visible(session):
                # As a new connection to it fails; a borrowed one, opened for another
                # database of the server, does not tell.
                problem = (
                    f"unknown database {state.site.database!r} (or one that the "
                    "exporter's user may not see)"
                )
                self._fail(report, Failure("connect", problem))
                return
            if missing:
                names = ", ".join(missing)
                problem = f"missing table(s) {names} in database {state.site.database}"
                self._fail(report, Failure("missing_table", problem))
                return
        # Statistics that could not be read fail their collector alone (`stats_error`).
        # Made anew rather than by dataclasses.replace, which reads the class's fields on
        # every call (a thousand stores' rounds make a thousand of these per scrape).
        context = DatabaseContext(
            session,
            tables,
            state.site,
            stats or {},
            totals=totals,
            earlier=earlier,
            prefetched=statement.prefetched,
            stats_error=statement.stats_error,
        )
        self._collectors.read(report, context, earlier, statement, served)
        self._finish(report, session)

    def _read_express(
        self,
        prefix: str,
        session: Session,
        started: float,
        plan: PrefixPlan,
        values: dict[str, Row],
        seconds: float,
    ) -> None:
        """The prefix read with its answer taken by its plan (`ExpressPlans`): as the
        normal read goes on once its hot statement answered, with the kept statistics
        (of every table: only such are kept)."""
        state = self._state
        report = PrefixReport(plan.label, started, prefix)
        report.can_write = session.can_write
        self._reports.put(report)
        report.add(_tables_exist(_EVERY_TABLE_FOUND))
        earlier: dict[str, Reading] = {}
        tables = plan.tables
        totals = state.ledgers.walk(prefix, session, tables) if state.heavy_in_round else None
        context = DatabaseContext(
            session, tables, state.site, plan.stats, totals=totals, earlier=earlier,
            prefetched=values,
        )  # fmt: skip
        served = self._collectors.served_from_cache(prefix, context)
        statement = HotStatement(plan.stats, values, seconds)
        self._collectors.read(report, context, earlier, statement, served)
        self._finish(report, session)

    def _finish(self, report: PrefixReport, session: Session) -> None:
        """The prefix's report ends, once its collectors were read."""
        if session.lost:
            # A collector's reading failed on it (and counted it): a connection lost, or
            # one that could not be borrowed (a store answered ahead borrows none first).
            failed = session.connect_error
            problem = failed.message if failed else "the connection was lost during the round"
            self._fail(report, Failure("connect", problem, counted=True))
            return
        self._end(report)

    def _answered_ahead(self, ahead: StoreAhead | None, session: Session) -> bool:
        """Whether another round's batch answered the prefix's hot statement, for a session
        that connected before (its user's rights are known): then no connection is
        borrowed unless a collector sends a statement of its own."""
        if ahead is None or not session.has_connected or session.lost:
            return False
        return answered_ahead(ahead)

    def _hot_statement(
        self,
        prefix: str,
        context: DatabaseContext,
        served: dict[str, Reading],
        ahead: StoreAhead | None,
    ) -> HotStatement:
        """The hot statement, with the statistics a network's listing read, or those kept
        from an earlier round; when a statement with kept ones does not answer (a table
        dropped since, a lock), the statistics are read again, as after a failed statement
        of a first round (the collectors then read their columns apart, as there)."""
        state = self._state
        # Read with other stores (a server's read-ahead), a cached collector due in this
        # round reads its columns in a statement of its own: in the hot statement, its
        # store's statement would differ from the one read ahead for it in this round and
        # in the next (a store is read with others by its last statement), and was sent
        # alone twice per refresh (docs/performance.md).
        reading = [
            c
            for c in state.in_round
            if c.name not in served and (ahead is None or c.name not in state.cached)
        ]
        known: Mapping[str, TableStats] | None = state.discovered_stats.pop(prefix, None)
        kept = state.kept_stats.get(prefix)
        if known is None and kept is not None and state.clock() < kept[0]:
            statement = read_hot_statement(context, reading, kept[1], ahead, self._wave)
            if statement.prefetched or not statement.asked:
                return statement
            del state.kept_stats[prefix]
            return read_apart(context, None)
        # Due: read with other stores' whose statistics come due soon, apart from the hot
        # statement, which then stays the one read ahead for the store; else in it.
        wait = min(context.session.timeout, self._deadline.left())
        together = (
            None
            if known is not None or ahead is None
            else state.refresh.stats(context, prefix, wait)
        )
        if together is not None:
            known = together.stats
        statement = read_hot_statement(context, reading, known, ahead, self._wave)
        stats = statement.stats
        if stats is not None and all(table in stats for table in TABLES):
            interval = TABLE_STATS_INTERVAL * stagger(state.site.name, prefix, "tables")
            read_at = state.clock() if together is None else together.read_at
            state.kept_stats[prefix] = (read_at + interval, stats)
            seconds = statement.seconds if together is None else together.share
            row = KeptRow(read_at, read_at + interval, seconds, alone=together is None)
            state.refresh.kept_stats(context, prefix, row)
        else:
            state.refresh.forget_stats(context, prefix)
        return statement

    def _end(self, report: PrefixReport) -> None:
        report.end(self._state.clock() - report.started)
        self._state.answers[report.label] = report.failure is None

    def _fail(self, report: PrefixReport, failure: Failure) -> None:
        """The database did not answer for this label (or lacks its tables): up 0."""
        if not failure.counted:
            self._state.reader.counters.add(report.label, catalog.ERRORS, failure.kind)
        report.fail(failure)
        self._reports.put(report)
        self._end(report)

    def _all_fail(self, failure: Failure, started: float) -> None:
        for label in self._state.known_labels():
            self._fail(PrefixReport(label, started), failure)


_EVERY_TABLE = frozenset(TABLES)
_EVERY_TABLE_FOUND = (True,) * len(TABLES)


@functools.lru_cache(maxsize=16)
def _tables_exist(present: tuple[bool, ...]) -> tuple[Sample, ...]:
    """`table_exists` of each table (`TABLES`' order), made once per answer: the same
    in nearly every round of every store."""
    return tuple(
        sample(catalog.TABLE_EXISTS, found, table=table)
        for table, found in zip(TABLES, present, strict=True)
    )
