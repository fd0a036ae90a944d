"""One configured site entry: its long-lived state, its rounds, and their results.

`run` reads the database in one `DatabaseRound`; `finish` turns the round's reports into
results, in one way whether the round ended or the scrape stopped waiting for it: sources
not read by then are reported as not read, and the site-wide sources (the settings, the
Kubernetes workers: never read on the database server's threads) and the counters are
added. `up` says whether the database answered: a site the round has not reached when the
scrape gives up (waiting behind a locked neighbour on the same server, say) keeps its last
answer, its collectors marked as not read.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Collection, Sequence

from actionscheduler_exporter.collectors import SiteSources, site_sources
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.servers import DatabaseServers
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.rounds.database_round import DatabaseRound
from actionscheduler_exporter.rounds.report import PrefixReport, RoundReports
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site_state import SiteState
from actionscheduler_exporter.sharding import ALL_SITES, Shard
from actionscheduler_exporter.sources.database import Collector
from actionscheduler_exporter.sources.problem_log import LogLine, ProblemLog
from actionscheduler_exporter.sources.source import NOT_READ
from actionscheduler_exporter.timing import Clock, Deadline

NOT_REACHED = "not read: the round had not reached this site by the scrape's deadline"


class MonitoredSite:
    def __init__(
        self,
        site: SiteConfig,
        clock: Clock = time.monotonic,
        *,
        sources: SiteSources | None = None,
        shard: Shard = ALL_SITES,
        servers: DatabaseServers | None = None,
        session: Session | None = None,
        problems: ProblemLog | None = None,
    ) -> None:
        """`sources`: the site's sources (`collectors.site_sources` by default).
        `servers`: borrow connections from the database server's pool (the exporter);
        without, the site keeps a connection of its own (one-off checks, tests), or uses
        `session` (tests that record or script the statements). `problems`: the
        exporter's shared log of problems, written once per scrape."""
        self.site = site
        self._clock = clock
        self._state = state = SiteState.open(
            site, clock, sources or site_sources(site, clock), shard, servers, session, problems
        )
        self.session = state.session
        self._reader = state.reader
        self._heavy = state.heavy
        # The round in flight's (or the last one's) reports.
        self._reports = RoundReports()
        self._lock = threading.Lock()
        self._running = False

    @property
    def name(self) -> str:
        return self.site.name

    def site_label(self, prefix: str) -> str:
        return self._state.site_label(prefix)

    def served_as(self) -> list[tuple[str, str]]:
        """The site labels the site is served under, with their table prefixes: a
        network's subsites once a round has found them."""
        state = self._state
        if self.site.discovers_prefixes and state.known_prefixes:
            return [(state.site_label(prefix), prefix) for prefix in state.known_prefixes]
        return [(self.site.name, self.site.table_prefix)]

    def run(self, deadline: Deadline) -> RoundReports:
        """Reads the database for every prefix until `deadline`; returns the reports (also
        visible, while the round runs, to a scrape that stops waiting)."""
        reports = RoundReports()
        with self._lock:
            self._reports = reports
            self._running = True
        try:
            try:
                DatabaseRound(self._state, reports, deadline).run()
            finally:
                self.session.release()
                reports.close()
            return reports
        finally:
            with self._lock:
                self._running = False

    @property
    def results_may_wait(self) -> bool:
        """Whether `finish` may wait for a site-wide source (the Kubernetes API)."""
        return any(source.may_wait for source in self._state.site_wide)

    def finish(self, reports: RoundReports | None, until: Deadline) -> list[SiteResult]:
        """The results of a round that ended (`reports`), or of the round in flight when
        the scrape stops waiting (None). `until`: the site-wide sources must have answered
        by then."""
        if reports is None:
            with self._lock:
                # A round still waiting for a thread has read nothing: the reports are the
                # previous round's, not this scrape's.
                reports = self._reports if self._running else RoundReports()
        found = reports.snapshot()
        labels: Sequence[str] = self._state.known_labels()
        if len(found) != 1 or len(labels) != 1 or labels[0] not in found:
            # A set to look in: a network's thousand labels made this a million comparisons.
            known = set(labels)
            labels = [*labels, *(label for label in found if label not in known)]
        # (else a site of one label that its round reported: most of a fleet's)
        results = [self._result(label, found.get(label)) for label in labels]
        site_wide = [item for source in self._state.site_wide for item in source.samples(until)]
        counters = self._reader.counters
        for result in results:
            result.samples += site_wide
            result.samples += counters.samples_of(result.label, _SITE_COUNTERS)
        return results

    def close(self) -> None:
        self._reader.close()
        self.session.close()
        if self._heavy is not None:
            self._heavy.close()

    def broken(self, problem: str) -> SiteResult:
        """The site as down, for a scrape whose results of it could not be assembled."""
        self._reader.counters.add(self.site.name, catalog.ERRORS, "malformed")
        result = SiteResult(self.site.name, self.site.labels, False, problems=[problem])
        result.samples.append(sample(catalog.UP, False))
        return result

    # The assembly of one label's result: the one place that does it. -------------------

    def _result(self, label: str, report: PrefixReport | None) -> SiteResult:
        reader = self._reader
        if report is None:
            return self._not_reached(label)
        # Copies: a round's reports are shared by the scrapes that joined it.
        result = SiteResult(
            label, self.site.labels, report.failure is None, [*report.samples], [*report.problems]
        )
        if not self._state.in_round_names <= report.read:
            result.samples += self._not_read(self._state.in_round, report.read)
        failure = report.failure
        if failure is not None:
            result.problems.insert(0, failure.problem)
            reader.problem(
                label, LogLine.of("site down", label, kind=failure.kind, problem=failure.problem)
            )
            if self._heavy is not None:  # no stale heavy values for a site that is down
                result.samples += self._not_read(self._heavy.collectors)
        else:
            note = None
            if not report.complete:
                problem = "the round of queries took longer than the scrape's deadline"
                result.problems.append(problem)
                reader.counters.add(label, catalog.ERRORS, "deadline")
                note = LogLine.of("slow round", label, problem=problem)
            if self._heavy is not None:
                heavy = report.heavy
                result.samples += heavy if heavy is not None else self._heavy.served(label)
            reader.problem(label, note)
        if report.can_write is not None:
            result.samples.append(_flag(catalog.USER_CAN_WRITE, report.can_write))
        duration = report.duration if report.complete else self._clock() - report.started
        result.samples += [
            _flag(catalog.UP, result.up),
            Sample(catalog.SCRAPE_DURATION, float(duration)),
        ]
        return result

    def _not_reached(self, label: str) -> SiteResult:
        """A site the round did not reach in time: not down (the database was not asked),
        its sources not read, `up` its last answer (none before the first)."""
        answered = self._state.answers.get(label)
        result = SiteResult(label, self.site.labels, bool(answered), problems=[NOT_REACHED])
        result.samples += self._not_read(self._state.in_round)
        if self._heavy is not None:
            result.samples += self._heavy.served(label)
        self._reader.counters.add(label, catalog.ERRORS, "deadline")
        # Under the site's own key, as a slow round's: "site recovered" when it is read again.
        self._reader.problem(label, LogLine.of("slow round", label, problem=NOT_REACHED))
        if answered is not None:
            result.samples.append(_flag(catalog.UP, answered))
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
            for item in self._reader.report(collector, NOT_READ)
        ]


# Each site label's counters: its errors by kind and its database time by tier.
_SITE_COUNTERS = (
    (catalog.ERRORS, catalog.ERROR_KINDS, "kind"),
    (catalog.DATABASE_SECONDS, catalog.TIERS, "tier"),
)


@functools.lru_cache(maxsize=8)
def _flag(metric: catalog.MetricDef, value: bool) -> Sample:
    """A site's `up` or `database_user_can_write`: one sample per value, made once (a
    thousand sites' scrape made two thousand of them)."""
    return sample(metric, value)
