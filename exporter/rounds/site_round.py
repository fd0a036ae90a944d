"""One configured site entry: its sources, its database session and its round.

A round checks the tables, then reads every source that is read in each round (the hot
collectors and the log follower) once for each table prefix (one prefix, or all of them
for `table_prefix: auto`), and adds the sources read in the background (the heavy tier,
the Kubernetes workers) and the constant ones (the settings). Every reading goes through
the `Observer`, which adds success, duration, age and errors. A failing source is marked
and the others go on; a lost connection ends the round and marks the site down.

A scrape that cannot wait for the end of the round gets what the round has found so far:
the sources that answered report their values, the others are marked as not read, and
`up` says whether the database answered at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import wait
from dataclasses import dataclass
from typing import Any

from exporter.collectors.settings import SiteSettings
from exporter.config.model import SiteConfig
from exporter.db.query_error import QueryError
from exporter.db.schema import TABLES, TableNames
from exporter.db.session import Session
from exporter.db.tables import TableStats, discover_prefixes, read_table_stats
from exporter.kubernetes.workers import KubernetesWorkers
from exporter.log_events.collector import LogEventsCollector
from exporter.metrics import catalog
from exporter.metrics.samples import sample
from exporter.rounds.counters import SiteCounters
from exporter.rounds.deadline import Deadline
from exporter.rounds.heavy_tier import HeavyTier
from exporter.rounds.lanes import Lane, Lanes
from exporter.rounds.observer import Observer
from exporter.rounds.result import SiteResult
from exporter.rounds.site_wide import SiteWideSource
from exporter.sharding import ALL_SITES, Shard
from exporter.sources.database import Collector, DatabaseContext
from exporter.sources.source import NOT_READ, Clock
from exporter.totals.ledger import Ledgers

# Time left to hand a round's results over before the scrape's deadline.
_HANDOVER_MARGIN = 0.25


@dataclass
class _InFlight:
    """A table prefix's result as the round in flight fills it."""

    result: SiteResult
    started: float
    finished: bool = False  # the prefix's own samples are complete
    done: bool = False  # the heavy tier's are added too


class SiteRound:
    def __init__(
        self,
        site: SiteConfig,
        collectors: Sequence[Collector],
        clock: Clock = time.monotonic,
        shard: Shard = ALL_SITES,
        lanes: Lanes | None = None,
    ) -> None:
        """`lanes`: borrow connections from the database server's pool (the exporter);
        without, the site keeps a connection of its own (one-off checks, tests)."""
        self.site = site
        self._shard = shard
        self._lane = lanes.for_site(site) if lanes else None
        self.session = Session(site, pool=self._lane.pool if self._lane else None)
        self._clock = clock
        self._observer = Observer(SiteCounters(), clock)
        database: tuple[Collector, ...] = (*collectors, LogEventsCollector(site, clock))
        self._database = database
        self._in_round = tuple(c for c in database if not c.freshness(site).background)
        heavy = tuple(c for c in database if c.freshness(site).background)
        self._ledgers = Ledgers(site.heavy_chunk_rows, site.heavy_settled_check_every)
        self._heavy = (
            HeavyTier(site, heavy, self._observer, self._ledgers, lanes) if heavy else None
        )
        self._site_sources: list[SiteWideSource[Any]] = [
            SiteWideSource(SiteSettings(), site, site, self._observer)
        ]
        if site.kubernetes is not None:
            workers = KubernetesWorkers(site.kubernetes)
            self._site_sources.append(SiteWideSource(workers, None, site, self._observer))
        self._known_prefixes: list[str] = [] if site.discovers_prefixes else [site.table_prefix]
        self._others_prefixes = 0  # discovered subsites served by other shards
        self._discovered_stats: dict[str, dict[str, TableStats]] = {}
        self._in_flight: dict[str, _InFlight] = {}
        self._in_flight_lock = threading.Lock()
        self._running = False

    def site_label(self, prefix: str) -> str:
        return f"{self.site.name}:{prefix}" if self.site.discovers_prefixes else self.site.name

    def run(self, deadline: Deadline) -> list[SiteResult]:
        with self._in_flight_lock:
            self._in_flight = {}
            self._running = True
        try:
            try:
                results = self._run_database(deadline)
            finally:
                self.session.release()
            # Independent of the database: reported whether the site is up or not, within
            # the time the round has left.
            self._add_site_sources(results, deadline.at - self._clock() - _HANDOVER_MARGIN)
            self._add_counters(results)
            return results
        finally:
            with self._in_flight_lock:
                self._running = False

    def timed_out(self, waited: float) -> list[SiteResult]:
        """What the round in flight has found so far, for a scrape that gave up waiting."""
        started = self._clock() - waited
        problem = f"the round of queries took longer than the scrape's {waited:.1f}s"
        with self._in_flight_lock:
            # A round still waiting for a thread has read nothing: the entries are the
            # previous round's.
            in_flight = {
                label: (flight.finished, flight.done, flight.started, flight.result.up,
                        list(flight.result.samples), list(flight.result.problems))
                for label, flight in self._in_flight.items()
            } if self._running else {}  # fmt: skip
        labels = [self.site_label(p) for p in self._known_prefixes] or self._whole_site_label()
        results: list[SiteResult] = []
        for label in labels:
            if label not in in_flight:  # the database has not answered for it in time
                results.append(self._down(label, "deadline", problem, started))
                continue
            finished, done, prefix_started, up, samples, problems = in_flight[label]
            result = SiteResult(label, self.site.labels, up, samples, problems)
            if finished:
                if not done and self._heavy is not None and up:
                    result.samples += self._heavy.served(label)
                results.append(result)
                continue
            reported = {
                dict(item.labels)["collector"]
                for item in samples
                if item.metric is catalog.COLLECTOR_SUCCESS
            }
            for collector in self._in_round:
                if collector.name not in reported:
                    result.samples += self._observer.report(collector, NOT_READ, aged=False)
            if self._heavy is not None:
                result.samples += self._heavy.served(label)
            result.problems.append(problem)
            self._observer.counters.add(label, catalog.ERRORS, "deadline")
            note = f"slow round site={label} problem={problem!r}"
            results.append(self._finish(result, prefix_started, note=note))
        self._add_site_sources(results, 0.0)
        self._add_counters(results)
        return results

    def _add_counters(self, results: list[SiteResult]) -> None:
        """The error and database-time counters, last: they include the whole round."""
        counters = self._observer.counters
        for result in results:
            result.samples += counters.samples(result.site, catalog.ERRORS, catalog.ERROR_KINDS)
            result.samples += counters.samples(
                result.site, catalog.DATABASE_SECONDS, catalog.TIERS, label="tier"
            )

    def _add_site_sources(self, results: list[SiteResult], budget: float) -> None:
        for source in self._site_sources:
            found = source.samples(budget)
            for result in results:
                result.samples += found

    def close(self) -> None:
        self.session.close()

    def _run_database(self, deadline: Deadline) -> list[SiteResult]:
        started = self._clock()
        try:
            prefixes = self._prefixes()
        except QueryError as error:
            return self._all_down(error.kind, error.message, started)
        if not prefixes and self._others_prefixes:
            return []  # every subsite of the network is served by another shard
        if not prefixes:
            return self._all_down(
                "missing_table",
                f"no table named *actionscheduler_actions in database {self.site.database}",
                started,
            )
        if len(prefixes) > 1 and self._lane is not None:
            # A network's subsites are read side by side on the server's connections.
            self.session.release()
            results = self._run_prefixes_in_lane(prefixes, deadline, self._lane, started)
        else:
            results = self._run_prefixes(iter(prefixes), deadline, self.session, started)
        # Before waiting for the heavy tier, which may need a connection of the same pool.
        self.session.release()
        if self._heavy is not None:
            up = {prefix: result.site for prefix, result in results.items() if result.up}
            # The first refresh is waited for with half the time left: a big network's
            # first walk may take longer than a scrape, whose answer must not wait for it.
            budget = (deadline.at - self._clock() - _HANDOVER_MARGIN) / 2
            for prefix, samples in self._heavy.samples(up, budget).items():
                results[prefix].samples += samples
            for prefix in up:
                results[prefix].problems += self._heavy.problems(prefix)
        with self._in_flight_lock:
            for flight in self._in_flight.values():
                flight.done = True
        return list(results.values())

    def _run_prefixes(
        self,
        prefixes: Iterator[str],
        deadline: Deadline,
        session: Session,
        started: float,
        results: dict[str, SiteResult] | None = None,
    ) -> dict[str, SiteResult]:
        """Reads the prefixes one after the other on one session; once its connection is
        lost, the rest are reported down at once instead of each waiting to reconnect."""
        results = {} if results is None else results
        lost = False
        for prefix in prefixes:
            label = self.site_label(prefix)
            if lost:
                problem = "the connection was lost earlier in this round"
                results[prefix] = self._down(label, "connect", problem, started, session)
                continue
            results[prefix] = self._run_prefix(prefix, deadline, session)
            lost = not session.connected
        return results

    def _run_prefixes_in_lane(
        self, prefixes: list[str], deadline: Deadline, lane: Lane, started: float
    ) -> dict[str, SiteResult]:
        pending = iter(prefixes)
        lock = threading.Lock()
        results: dict[str, SiteResult] = {}

        def next_prefixes() -> Iterator[str]:
            while True:
                with lock:
                    prefix = next(pending, None)
                if prefix is None:
                    return
                yield prefix

        def work() -> None:
            session = Session(self.site, pool=lane.pool)
            try:
                self._run_prefixes(next_prefixes(), deadline, session, started, results)
            finally:
                session.release()

        workers = [lane.prefixes.submit(work) for _ in range(min(lane.pool.size, len(prefixes)))]
        wait(workers, timeout=max(0.0, deadline.at - self._clock()))
        problem = "the round of queries ran past the scrape's deadline"
        for prefix in prefixes:  # those no worker reached in time
            if prefix not in results:
                results[prefix] = self._down(self.site_label(prefix), "deadline", problem, started)
        return {prefix: results[prefix] for prefix in prefixes}

    def _prefixes(self) -> list[str]:
        if self.site.discovers_prefixes:
            found = discover_prefixes(self.session)
            self._known_prefixes = [p for p in found if self._shard.owns(self.site_label(p))]
            self._others_prefixes = len(found) - len(self._known_prefixes)
            self._discovered_stats = found
            self._ledgers.keep(self._known_prefixes)
        return self._known_prefixes

    def _run_prefix(self, prefix: str, deadline: Deadline, session: Session) -> SiteResult:
        started = self._clock()
        label = self.site_label(prefix)
        tables = TableNames(prefix)
        spent = session.statement_seconds
        try:
            session.open()
            # A network's subsites: read with the prefixes, in one statement per round.
            known = self._discovered_stats.pop(prefix, None)
            stats = known if known is not None else read_table_stats(session, tables)
        except QueryError as error:
            return self._down(label, error.kind, error.message, started, session)
        finally:
            self._spent(label, "hot", spent, session)

        result = SiteResult(label, self.site.labels, up=True)
        result.samples += [
            sample(catalog.TABLE_EXISTS, table in stats, table=table) for table in TABLES
        ]
        missing = [tables.name(table) for table in TABLES if table not in stats]
        if missing:
            problem = f"missing table(s) {', '.join(missing)} in database {self.site.database}"
            for collector in self._in_round:
                result.samples += self._observer.report(collector, NOT_READ, aged=False)
            return self._finish(result, started, session, failure=("missing_table", problem))

        observer = self._observer
        # Read only when the heavy collectors run in the round (heavy_interval 0).
        totals = self._ledgers.walk(prefix, session, tables)
        context = DatabaseContext(session, tables, self.site, stats, totals=totals)
        flight = _InFlight(result, started)
        with self._in_flight_lock:
            self._in_flight[label] = flight
        for collector in self._in_round:
            reading = NOT_READ
            if not session.connected:
                pass  # reported as not read: the connection is gone
            elif self._clock() > deadline.at:
                observer.count(label, collector, "deadline")
                result.problems.append(f"{collector.name}: skipped, the scrape's deadline passed")
            else:
                spent = session.statement_seconds
                reading = observer.read(collector, context, label)
                self._spent(label, collector.tier, spent, session)
                if not reading.ok:
                    result.problems.append(f"{collector.name}: {reading.problem}")
            reported = observer.report(collector, reading, aged=False)
            with self._in_flight_lock:
                result.samples += reported
        with self._in_flight_lock:
            flight.finished = True
            if not session.connected:
                return self._finish(
                    result,
                    started,
                    session,
                    failure=("connect", "the connection was lost during the round"),
                    counted=True,
                )
            return self._finish(result, started, session)

    def _spent(self, label: str, tier: str, before: float, session: Session) -> None:
        """Counts the database time the session spent since `before`, for the tier."""
        spent = session.statement_seconds - before
        self._observer.counters.add(label, catalog.DATABASE_SECONDS, tier, spent)

    def _whole_site_label(self) -> list[str]:
        """The label a site is reported under before its subsites are known (or when its
        database is unreachable): on one shard only, as every other series."""
        if self._others_prefixes or not self._shard.owns(self.site.name):
            return []
        return [self.site.name]

    def _all_down(self, kind: str, problem: str, started: float) -> list[SiteResult]:
        labels = [self.site_label(p) for p in self._known_prefixes] or self._whole_site_label()
        return [self._down(label, kind, problem, started) for label in labels]

    def _down(
        self,
        label: str,
        kind: str,
        problem: str,
        started: float,
        session: Session | None = None,
    ) -> SiteResult:
        result = SiteResult(label, self.site.labels, up=False)
        for collector in self._in_round:
            result.samples += self._observer.report(collector, NOT_READ, aged=False)
        return self._finish(result, started, session, failure=(kind, problem))

    def _finish(
        self,
        result: SiteResult,
        started: float,
        session: Session | None = None,
        failure: tuple[str, str] | None = None,
        *,
        counted: bool = False,
        note: str = "",
    ) -> SiteResult:
        """Adds the round's own samples; `note` is a problem to log that is not a failure."""
        label = result.site
        observer = self._observer
        if failure is not None:
            kind, problem = failure
            result.up = False
            result.problems.insert(0, problem)
            if not counted:
                observer.counters.add(label, catalog.ERRORS, kind)
            observer.problem(label, f"site down site={label} kind={kind} problem={problem!r}")
            if self._heavy is not None:  # no stale heavy values for a site that is down
                for collector in self._heavy.collectors:
                    result.samples += observer.report(collector, NOT_READ, aged=False)
        else:
            observer.problem(label, note)
        if session is not None and session.connected:
            result.samples.append(sample(catalog.USER_CAN_WRITE, session.can_write))
        result.samples += [
            sample(catalog.UP, result.up),
            sample(catalog.SCRAPE_DURATION, self._clock() - started),
        ]
        return result
