"""One configured site entry: its sources, its database session and its round.

A round checks the tables, then reads every source that is read in each round (the hot
collectors and the log events collector) once for each table prefix (one prefix, or all of
them for `table_prefix: auto`), recording each reading in the prefix's `PrefixReport` as it
arrives; the heavy tier's samples are added when the prefixes are read. Every reading goes
through the `Observer`, which adds success, duration, age and errors, and its statements'
time is counted by the session, per site and tier. A failing source is marked and the
others go on; a lost connection ends the round and marks the site down.

`finish` turns the reports into results, in one way whether the round ended or the scrape
stopped waiting for it: sources not read by then are reported as not read, and the
site-wide sources (the settings, the Kubernetes workers: never read on the database
server's threads) and the counters are added. `up` says whether the database answered: a
site the round has not reached when the scrape gives up (waiting behind a locked neighbour
on the same server, say) keeps its last answer, its collectors marked as not read.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import wait
from typing import Any

from actionscheduler_exporter.collectors.settings import SiteSettings
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import TABLES, TableNames
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.db.tables import TableStats, discover_prefixes
from actionscheduler_exporter.kubernetes.workers import KubernetesWorkers
from actionscheduler_exporter.log_events.collector import LogEventsCollector
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.rounds.budget import ScrapeBudget
from actionscheduler_exporter.rounds.combined import Combined, read_combined
from actionscheduler_exporter.rounds.counters import SiteCounters
from actionscheduler_exporter.rounds.deadline import Deadline
from actionscheduler_exporter.rounds.heavy_tier import HeavyTier
from actionscheduler_exporter.rounds.kept_readings import KeptReadings
from actionscheduler_exporter.rounds.lanes import Lane, Lanes
from actionscheduler_exporter.rounds.observer import Observer
from actionscheduler_exporter.rounds.problem_log import ProblemLog
from actionscheduler_exporter.rounds.report import Failure, PrefixReport
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site_wide import SiteWideSource
from actionscheduler_exporter.sharding import ALL_SITES, Shard
from actionscheduler_exporter.sources.database import Collector, DatabaseContext, check_order
from actionscheduler_exporter.sources.source import NOT_READ, Clock, Reading
from actionscheduler_exporter.totals.ledger import Ledgers

Reports = dict[str, PrefixReport]
NOT_REACHED = "not read: the round had not reached this site by the scrape's deadline"


class SiteRound:
    def __init__(
        self,
        site: SiteConfig,
        collectors: Sequence[Collector],
        clock: Clock = time.monotonic,
        shard: Shard = ALL_SITES,
        lanes: Lanes | None = None,
        session: Session | None = None,
        problems: ProblemLog | None = None,
    ) -> None:
        """`lanes`: borrow connections from the database server's pool (the exporter);
        without, the site keeps a connection of its own (one-off checks, tests), or uses
        `session` (tests that record or script the statements). `problems`: the
        exporter's shared log of problems, written once per scrape."""
        self.site = site
        self._shard = shard
        self._lane = lanes.for_site(site) if lanes else None
        self.session = session or Session(site, pool=self._lane.pool if self._lane else None)
        self._clock = clock
        self._observer = Observer(SiteCounters(), clock, problems)
        database: tuple[Collector, ...] = (*collectors, LogEventsCollector(site, clock))
        self._database = database
        self._in_round = tuple(c for c in database if not c.freshness(site).background)
        check_order(self._in_round)
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
        # The round in flight's (or the last one's) reports, by site label.
        self._reports: dict[str, PrefixReport] = {}
        self._lock = threading.Lock()
        self._running = False
        # Whether the database answered for a site label at the last round that read it.
        self._answers: dict[str, bool] = {}
        self._kept = KeptReadings(clock)

    def site_label(self, prefix: str) -> str:
        return f"{self.site.name}:{prefix}" if self.site.discovers_prefixes else self.site.name

    def run(self, deadline: Deadline) -> Reports:
        """Reads the database for every prefix; returns the reports (also visible, while
        the round runs, to a scrape that stops waiting)."""
        reports: Reports = {}
        with self._lock:
            self._reports = reports
            self._running = True
        try:
            try:
                self._run_database(deadline, reports)
            finally:
                self.session.release()
            return reports
        finally:
            with self._lock:
                self._running = False

    def finish(self, reports: Reports | None, until: float) -> list[SiteResult]:
        """The results of a round that ended (`reports`), or of the round in flight when
        the scrape stops waiting (None). `until`: the clock time by which the site-wide
        sources must have answered."""
        with self._lock:
            if reports is None:
                # A round still waiting for a thread has read nothing: the reports are the
                # previous round's, not this scrape's.
                reports = self._reports if self._running else {}
            found = {label: report.snapshot() for label, report in reports.items()}
        known = [self.site_label(p) for p in self._known_prefixes] or self._whole_site_label()
        labels = [*known, *(label for label in found if label not in known)]
        results = [self._result(label, found.get(label)) for label in labels]
        site_wide = [
            item
            for source in self._site_sources
            for item in source.samples(max(0.0, until - self._clock()))
        ]
        counters = self._observer.counters
        for result in results:
            result.samples += site_wide
            result.samples += counters.samples(result.label, catalog.ERRORS, catalog.ERROR_KINDS)
            result.samples += counters.samples(
                result.label, catalog.DATABASE_SECONDS, catalog.TIERS, label="tier"
            )
        return results

    def close(self) -> None:
        self.session.close()

    # The assembly of one label's result: the one place that does it. -------------------

    def _result(self, label: str, report: PrefixReport | None) -> SiteResult:
        observer = self._observer
        if report is None:
            return self._not_reached(label)
        result = SiteResult(
            label, self.site.labels, report.failure is None, report.samples, report.problems
        )
        result.samples += self._not_read(self._in_round, report.read)
        failure = report.failure
        if failure is not None:
            result.problems.insert(0, failure.problem)
            observer.problem(
                label, f"site down site={label} kind={failure.kind} problem={failure.problem!r}"
            )
            if self._heavy is not None:  # no stale heavy values for a site that is down
                result.samples += self._not_read(self._heavy.collectors)
        else:
            note = ""
            if not report.complete:
                problem = "the round of queries took longer than the scrape's deadline"
                result.problems.append(problem)
                observer.counters.add(label, catalog.ERRORS, "deadline")
                note = f"slow round site={label} problem={problem!r}"
            if self._heavy is not None:
                heavy = report.heavy
                result.samples += heavy if heavy is not None else self._heavy.served(label)
            observer.problem(label, note)
        if report.can_write is not None:
            result.samples.append(sample(catalog.USER_CAN_WRITE, report.can_write))
        duration = report.duration if report.complete else self._clock() - report.started
        result.samples += [
            sample(catalog.UP, result.up),
            sample(catalog.SCRAPE_DURATION, duration),
        ]
        return result

    def _not_reached(self, label: str) -> SiteResult:
        """A site the round did not reach in time: not down (the database was not asked),
        its sources not read, `up` its last answer (none before the first)."""
        answered = self._answers.get(label)
        result = SiteResult(label, self.site.labels, bool(answered), problems=[NOT_REACHED])
        result.samples += self._not_read(self._in_round)
        if self._heavy is not None:
            result.samples += self._heavy.served(label)
        self._observer.counters.add(label, catalog.ERRORS, "deadline")
        # Under the site's own key, as a slow round's: "site recovered" when it is read again.
        self._observer.problem(label, f"slow round site={label} problem={NOT_REACHED!r}")
        if answered is not None:
            result.samples.append(sample(catalog.UP, answered))
        return result

    def _not_read(
        self, collectors: Sequence[Collector], read: Collection[str] = ()
    ) -> list[Sample]:
        """The one place that reports sources as not read: those of `collectors` whose
        names are not in `read`."""
        return [
            item
            for collector in collectors
            if collector.name not in read
            for item in self._observer.report(collector, NOT_READ, aged=False)
        ]

    # The database work of a round. ------------------------------------------------------

    def _run_database(self, deadline: Deadline, reports: Reports) -> None:
        started = self._clock()
        try:
            prefixes = self._prefixes()
        except QueryError as error:
            self._all_fail(reports, Failure(error.kind, error.message), started)
            return
        if not prefixes and self._others_prefixes:
            return  # every subsite of the network is served by another shard
        if not prefixes:
            problem = f"no table named *actionscheduler_actions in database {self.site.database}"
            self._all_fail(reports, Failure("missing_table", problem), started)
            return
        self._kept.retain(prefixes)
        if len(prefixes) > 1 and self._lane is not None:
            # A network's subsites are read side by side on the server's connections.
            self.session.release()
            self._run_prefixes_in_lane(prefixes, deadline, self._lane, reports)
        else:
            self._run_prefixes(iter(prefixes), deadline, self.session, reports)
        # Before waiting for the heavy tier, which may need a connection of the same pool.
        self.session.release()
        if self._heavy is not None:
            with self._lock:
                up = {r.prefix: r.label for r in reports.values() if r.failure is None}
            wait_for = ScrapeBudget.first_heavy_wait(deadline.at - self._clock())
            heavy = self._heavy.samples(up, wait_for)
            for prefix, label in up.items():
                reports[label].add_heavy(heavy.get(prefix, []), self._heavy.problems(prefix))

    def _run_prefixes(
        self, prefixes: Iterator[str], deadline: Deadline, session: Session, reports: Reports
    ) -> None:
        """Reads the prefixes one after the other on one session; once its connection is
        lost, the rest are reported down at once instead of each waiting to reconnect."""
        lost = False
        for prefix in prefixes:
            if lost:
                failure = Failure("connect", "the connection was lost earlier in this round")
                report = PrefixReport(self.site_label(prefix), self._clock(), prefix)
                self._fail(reports, report, failure)
                continue
            self._run_prefix(prefix, deadline, session, reports)
            lost = not session.connected

    def _run_prefixes_in_lane(
        self, prefixes: list[str], deadline: Deadline, lane: Lane, reports: Reports
    ) -> None:
        """Those no worker reaches in time are left out of the reports: not reached."""
        pending = iter(prefixes)
        lock = threading.Lock()

        def next_prefixes() -> Iterator[str]:
            while self._clock() <= deadline.at:
                with lock:
                    prefix = next(pending, None)
                if prefix is None:
                    return
                yield prefix

        def work() -> None:
            session = Session(self.site, pool=lane.pool)
            try:
                self._run_prefixes(next_prefixes(), deadline, session, reports)
            finally:
                session.release()

        workers = [lane.prefixes.submit(work) for _ in range(min(lane.pool.size, len(prefixes)))]
        wait(workers, timeout=max(0.0, deadline.at - self._clock()))

    def _prefixes(self) -> list[str]:
        if self.site.discovers_prefixes:
            found = discover_prefixes(self.session)
            self._known_prefixes = [p for p in found if self._shard.owns(self.site_label(p))]
            self._others_prefixes = len(found) - len(self._known_prefixes)
            self._discovered_stats = found
            self._ledgers.keep(self._known_prefixes)
        return self._known_prefixes

    def _run_prefix(
        self, prefix: str, deadline: Deadline, session: Session, reports: Reports
    ) -> None:
        started = self._clock()
        label = self.site_label(prefix)
        tables = TableNames(prefix)
        counters = self._observer.counters
        report = PrefixReport(label, started, prefix)
        earlier: dict[str, Reading] = {}
        # Read only when the heavy collectors run in the round (heavy_interval 0).
        totals = self._ledgers.walk(prefix, session, tables)
        context = DatabaseContext(session, tables, self.site, {}, totals=totals, earlier=earlier)
        meter = counters.meter(label, catalog.DATABASE_SECONDS, "hot")
        try:
            with session.billed_to(meter):
                session.open()
        except QueryError as error:
            self._fail(reports, report, Failure(error.kind, error.message))
            return
        # The database answered: from here on a scrape that stops waiting sees the report.
        report.can_write = session.can_write
        with self._lock:
            reports[label] = report
        try:
            with session.billed_to(meter):
                # A network's subsites: read with the prefixes, in one statement per round.
                known = self._discovered_stats.pop(prefix, None)
                combined = read_combined(context, self._in_round, known)
        except QueryError as error:
            self._fail(reports, report, Failure(error.kind, error.message))
            return
        stats = combined.stats
        report.add([sample(catalog.TABLE_EXISTS, table in stats, table=table) for table in TABLES])
        missing = [tables.name(table) for table in TABLES if table not in stats]
        if missing:
            problem = f"missing table(s) {', '.join(missing)} in database {self.site.database}"
            self._fail(reports, report, Failure("missing_table", problem))
            return
        context = dataclasses.replace(context, table_stats=stats, prefetched=combined.prefetched)
        self._read_collectors(report, context, earlier, deadline, combined)
        if not session.connected:
            lost = Failure("connect", "the connection was lost during the round", counted=True)
            self._fail(reports, report, lost)
            return
        self._end(report)

    def _read_collectors(
        self,
        report: PrefixReport,
        context: DatabaseContext,
        earlier: dict[str, Reading],
        deadline: Deadline,
        combined: Combined,
    ) -> None:
        """Each in-round collector in order, its reading recorded as it arrives; a good
        reading is handed to the collectors after it that need it (`earlier`)."""
        observer = self._observer
        locked = ""  # the collector that found a table locked: the rest are skipped
        for collector in self._in_round:
            if not context.session.connected:
                return  # the rest are reported as not read: the connection is gone
            skipped = ""
            if locked:
                skipped = f"{collector.name}: skipped, {locked} waited for a locked table"
            elif self._clock() > deadline.at:
                observer.count(report.label, collector, "deadline")
                skipped = f"{collector.name}: skipped, the scrape's deadline passed"
            if skipped:
                report.record(
                    collector.name, observer.report(collector, NOT_READ, aged=False), skipped
                )
                continue
            meter = observer.counters.meter(report.label, catalog.DATABASE_SECONDS, collector.tier)
            with context.session.billed_to(meter):
                reading = self._read(collector, context, report)
            if share := combined.share(collector.name):
                reading = dataclasses.replace(reading, duration=reading.duration + share)
            if reading.ok:
                earlier[collector.name] = reading
            elif reading.failure == "lock":
                locked = collector.name
            problem = "" if reading.ok else f"{collector.name}: {reading.problem}"
            report.record(collector.name, observer.report(collector, reading, aged=False), problem)

    def _read(
        self, collector: Collector, context: DatabaseContext, report: PrefixReport
    ) -> Reading:
        """A reading of the collector, or its kept one while that may be served."""
        freshness = collector.freshness(self.site)
        if not freshness.kept:
            return self._observer.read(collector, context, report.label)
        if collector.may_serve_kept(context):
            kept = self._kept.get(report.prefix, collector.name)
            if kept is not None:
                return kept
        reading = self._observer.read(collector, context, report.label)
        if reading.ok and collector.may_serve_kept(context):
            key = f"{self.site.name}\0{self.site.database}"
            self._kept.keep(key, report.prefix, collector.name, freshness.interval, reading)
        else:
            self._kept.drop(report.prefix, collector.name)
        return reading

    def _end(self, report: PrefixReport) -> None:
        report.end(self._clock() - report.started)
        self._answers[report.label] = report.failure is None

    def _fail(self, reports: Reports, report: PrefixReport, failure: Failure) -> None:
        """The database did not answer for this label (or lacks its tables): up 0."""
        if not failure.counted:
            self._observer.counters.add(report.label, catalog.ERRORS, failure.kind)
        report.fail(failure)
        with self._lock:
            reports[report.label] = report
        self._end(report)

    def _all_fail(self, reports: Reports, failure: Failure, started: float) -> None:
        labels = [self.site_label(p) for p in self._known_prefixes] or self._whole_site_label()
        for label in labels:
            self._fail(reports, PrefixReport(label, started), failure)

    def _whole_site_label(self) -> list[str]:
        """The label a site is reported under before its subsites are known (or when its
        database is unreachable): on one shard only, as every other series."""
        if self._others_prefixes or not self._shard.owns(self.site.name):
            return []
        return [self.site.name]
