"""One configured site entry: its database session and its round of queries.

A round checks the tables, then runs every hot-tier collector once for each table prefix
(one prefix, or all of them for `table_prefix: auto`), and adds the heavy tier's latest
values, which refresh in the background (`HeavyTier`), or inside the round when the
site's `heavy_interval` is 0. A failing collector is marked and the others go on; a lost
connection ends the round and marks the site down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from exporter import catalog
from exporter.collectors.base import Collector, Sample, SiteContext, Tier, sample
from exporter.config.model import SiteConfig
from exporter.db.errors import QueryError
from exporter.db.session import Session
from exporter.db.tables import TableNames, discover_prefixes, read_table_stats
from exporter.events.follower import LogFollower
from exporter.kubernetes.source import WorkerSource
from exporter.scrape.errors import ErrorCounts
from exporter.scrape.heavy import HeavyTier
from exporter.scrape.result import SiteResult, collector_samples

log = logging.getLogger(__name__)

_HANDOVER_MARGIN = 0.25


class Target:
    def __init__(self, site: SiteConfig, collectors: Sequence[Collector]) -> None:
        self.site = site
        self.session = Session(site)
        self._collectors = tuple(collectors)
        self._errors = ErrorCounts()
        # With heavy_interval 0 the heavy tier runs in the round, as the hot tier does.
        background = site.heavy_interval > 0
        self._in_round = tuple(c for c in self._collectors if not background or c.tier is Tier.HOT)
        self._in_background = tuple(c for c in self._collectors if c not in self._in_round)
        self._heavy = (
            HeavyTier(site, self._in_background, self._errors, self.site_label)
            if self._in_background
            else None
        )
        self._known_prefixes: list[str] = [] if site.discovers_prefixes else [site.table_prefix]
        # The log follower keeps a cursor and counters: one per table prefix, for life.
        self._followers: dict[str, LogFollower] = {}
        self._workers = WorkerSource(site.kubernetes) if site.kubernetes else None
        self._last_problem: dict[str, str] = {}

    def site_label(self, prefix: str) -> str:
        return f"{self.site.name}:{prefix}" if self.site.discovers_prefixes else self.site.name

    def run(self, deadline: float) -> list[SiteResult]:
        results = self._run_database(deadline)
        if self._workers is not None:
            # Independent of the database: reported whether the site is up or not.
            # Leave the round time to hand its results over before the scrape's deadline.
            budget = deadline - time.monotonic() - _HANDOVER_MARGIN
            workers = self._workers.samples(wait=max(0.0, budget))
            self._report(
                f"{self.site.name}/kubernetes",
                self._workers.last_error
                and f"kubernetes source failing site={self.site.name} "
                f"problem={self._workers.last_error!r}",
            )
            for result in results:
                result.samples += workers
        return results

    def _run_database(self, deadline: float) -> list[SiteResult]:
        started = time.monotonic()
        try:
            prefixes = self._prefixes()
        except QueryError as error:
            return self._all_down(error.kind, error.message, started)
        if not prefixes:
            return self._all_down(
                "missing_table",
                f"no table named *actionscheduler_actions in database {self.site.database}",
                started,
            )
        results: list[SiteResult] = []
        for prefix in prefixes:
            if not self.session.connected and results:
                results.append(
                    self._down(
                        self.site_label(prefix),
                        "connect",
                        "the connection was lost earlier in this round",
                        started,
                    )
                )
                continue
            results.append(self._run_prefix(prefix, deadline))
        if self._heavy is not None:
            self._add_heavy_tier(self._heavy, prefixes, results, deadline)
        return results

    def _add_heavy_tier(
        self, heavy: HeavyTier, prefixes: list[str], results: list[SiteResult], deadline: float
    ) -> None:
        up = [prefix for prefix, result in zip(prefixes, results, strict=True) if result.up]
        if up:
            heavy.refresh_if_stale(up, first_wait=deadline - time.monotonic() - _HANDOVER_MARGIN)
        for prefix, result in zip(prefixes, results, strict=True):
            if result.up:
                result.samples += heavy.samples(prefix)

    def timed_out(self, waited: float) -> list[SiteResult]:
        """Results for a scrape that gave up waiting on this target's round."""
        return self._all_down(
            "deadline",
            f"the round of queries took longer than the scrape's {waited:.1f}s",
            time.monotonic() - waited,
        )

    def close(self) -> None:
        self.session.close()

    def _prefixes(self) -> list[str]:
        if self.site.discovers_prefixes:
            self._known_prefixes = discover_prefixes(self.session)
        return self._known_prefixes

    def _run_prefix(self, prefix: str, deadline: float) -> SiteResult:
        started = time.monotonic()
        label = self.site_label(prefix)
        tables = TableNames(prefix)
        try:
            stats = read_table_stats(self.session, tables)
        except QueryError as error:
            return self._down(label, error.kind, error.message, started)

        result = SiteResult(label, self.site.labels, up=True)
        result.samples += [
            sample(catalog.TABLE_EXISTS, table in stats, table=table) for table in catalog.TABLES
        ]
        missing = [tables.name(table) for table in catalog.TABLES if table not in stats]
        if missing:
            problem = f"missing table(s) {', '.join(missing)} in database {self.site.database}"
            return self._finish(result, started, failure=("missing_table", problem))

        context = SiteContext(self.session, tables, self.site, stats)
        for collector in (*self._in_round, self._follower(prefix)):
            if not self.session.connected:
                result.samples += collector_samples(collector, ok=False, duration=0.0)
                continue
            if time.monotonic() > deadline:
                self._errors.add(label, "deadline")
                result.problems.append(f"{collector.name}: skipped, the scrape's deadline passed")
                result.samples += collector_samples(collector, ok=False, duration=0.0)
                continue
            collector_started = time.monotonic()
            try:
                result.samples += list(collector.collect(context))
                ok = True
            except QueryError as error:
                ok = False
                self._errors.add(label, error.kind)
                result.problems.append(f"{collector.name}: {error.message}")
                log.warning(
                    "collector failed site=%s collector=%s kind=%s error=%r",
                    label,
                    collector.name,
                    error.kind,
                    error.message,
                )
            result.samples += collector_samples(collector, ok, time.monotonic() - collector_started)
        if not self.session.connected:
            result.samples += self._failed(self._in_background)
            return self._finish(
                result,
                started,
                failure=("connect", "the connection was lost during the round"),
                counted=True,
            )
        return self._finish(result, started)

    def _follower(self, prefix: str) -> LogFollower:
        follower = self._followers.get(prefix)
        if follower is None:
            follower = self._followers[prefix] = LogFollower(
                self.site.log_rows_per_scrape,
                self.site.top_hooks,
                self.site.top_groups,
                self.site.log_gap_grace,
            )
        return follower

    def _all_down(self, kind: str, problem: str, started: float) -> list[SiteResult]:
        labels = [self.site_label(prefix) for prefix in self._known_prefixes] or [self.site.name]
        return [self._down(label, kind, problem, started) for label in labels]

    def _down(self, label: str, kind: str, problem: str, started: float) -> SiteResult:
        result = SiteResult(label, self.site.labels, up=False)
        result.samples += self._failed((*self._collectors, LogFollower))
        return self._finish(result, started, failure=(kind, problem))

    @staticmethod
    def _failed(collectors: Sequence[Collector | type[Collector]]) -> list[Sample]:
        return [
            item
            for collector in collectors
            for item in collector_samples(collector, ok=False, duration=0.0)
        ]

    def _finish(
        self,
        result: SiteResult,
        started: float,
        failure: tuple[str, str] | None = None,
        *,
        counted: bool = False,
    ) -> SiteResult:
        label = result.site
        if failure is not None:
            kind, problem = failure
            result.up = False
            result.problems.insert(0, problem)
            if not counted:
                self._errors.add(label, kind)
            self._report(label, f"site down site={label} kind={kind} problem={problem!r}")
        else:
            self._report(label, "")
        result.samples += settings_samples(self.site)
        if self.session.connected:
            result.samples.append(sample(catalog.USER_CAN_WRITE, self.session.can_write))
        result.samples += [
            sample(catalog.UP, result.up),
            sample(catalog.SCRAPE_DURATION, time.monotonic() - started),
            *self._errors.samples(label),
        ]
        return result

    def _report(self, label: str, problem: str) -> None:
        """Logs a site's state when it changes, not on every scrape."""
        previous = self._last_problem.get(label)
        if problem == previous:
            return
        self._last_problem[label] = problem
        if problem:
            log.warning(problem)
        elif previous:
            log.info("site recovered site=%s", label)


def settings_samples(site: SiteConfig) -> list[Sample]:
    """The site's configuration that rules and dashboards compare the queue with."""
    alerts = site.alerts
    samples = [
        sample(catalog.TIMEOUT_PERIOD, site.timeout_period),
        sample(catalog.HEAVY_INTERVAL, site.heavy_interval),
        sample(catalog.THRESHOLD_OLDEST_DUE_WARNING, alerts.oldest_due_warning),
        sample(catalog.THRESHOLD_OLDEST_DUE_CRITICAL, alerts.oldest_due_critical),
        sample(catalog.THRESHOLD_DRAIN_TARGET, alerts.drain_target),
        sample(catalog.THRESHOLD_FAILURE_RATIO, alerts.failure_ratio),
        sample(catalog.THRESHOLD_FAILURE_RATE, alerts.failure_rate),
        sample(catalog.THRESHOLD_RESTARTS, alerts.restarts),
    ]
    if site.concurrent_batches_limit is not None:
        samples.append(sample(catalog.CONCURRENT_BATCHES_LIMIT, site.concurrent_batches_limit))
    if site.workers is not None:
        workers = site.workers
        samples.append(
            sample(
                catalog.WORKER_INFO,
                1,
                namespace=workers.namespace,
                deployment=workers.deployment,
                container=workers.container,
                horizontalpodautoscaler=workers.hpa,
            )
        )
    return samples
