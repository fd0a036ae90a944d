"""Runs one round per site for a scrape, sharing rounds between concurrent scrapes."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass

from actionscheduler_exporter.collectors import default_collectors
from actionscheduler_exporter.config.model import ExporterConfig, SiteConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import sample
from actionscheduler_exporter.rounds.budget import DEFAULT_SCRAPE_TIMEOUT, ScrapeBudget
from actionscheduler_exporter.rounds.discovery import DatabaseDiscovery
from actionscheduler_exporter.rounds.lanes import Lanes
from actionscheduler_exporter.rounds.problem_log import ProblemLog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.singleflight import SingleFlight
from actionscheduler_exporter.rounds.site_round import Reports, SiteRound
from actionscheduler_exporter.sources.database import Collector
from actionscheduler_exporter.sources.source import Clock


@dataclass(frozen=True)
class PendingScrape:
    started: float
    budget: ScrapeBudget
    rounds: list[SiteRound]
    futures: list[Future[Reports]]
    # Discovery entries that found no database (or could not list them yet).
    undiscovered: list[SiteResult]


@dataclass
class _Entry:
    round: SiteRound
    flight: SingleFlight[Reports]


class Coordinator:
    def __init__(
        self,
        config: ExporterConfig,
        collectors: Sequence[Collector] | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._collectors = tuple(collectors) if collectors is not None else default_collectors()
        self.config = config
        self._clock = clock
        self._shard = config.shard
        # Rounds run in their database server's lane, at most connections_per_server at once.
        self.lanes = Lanes(config.connections_per_server)
        self._entries: dict[str, _Entry] = {}
        # Problems of every site, written once per scrape (a line for many sites).
        self._problems = ProblemLog(buffered=True)
        self._lock = threading.Lock()
        self._discoveries = [
            DatabaseDiscovery(site, self.lanes, clock)
            for site in config.sites
            if site.discovers_databases
        ]
        for site in config.sites:
            if not site.discovers_databases:
                self._add(site)

    @property
    def sites(self) -> list[SiteRound]:
        with self._lock:
            return [entry.round for entry in self._entries.values()]

    def scrape(self, timeout: float = DEFAULT_SCRAPE_TIMEOUT) -> list[SiteResult]:
        """One scrape with the scraper's `timeout` (the `check` command, tests)."""
        pending = self.begin(ScrapeBudget(timeout))
        wait(
            pending.futures,
            timeout=max(0.0, pending.started + pending.budget.rounds_wait - self._clock()),
        )
        return self.results(pending)

    def begin(self, budget: ScrapeBudget) -> PendingScrape:
        """Joins (or starts) each site's round; does not wait for them. A round runs for
        `budget.round_runs_for` (see `rounds.budget`)."""
        started = self._clock()
        undiscovered = self._discover(budget.discovery_wait)
        deadline = started + budget.round_runs_for
        with self._lock:
            entries = list(self._entries.values())
        return PendingScrape(
            started,
            budget,
            [entry.round for entry in entries],
            [entry.flight.join(deadline) for entry in entries],
            undiscovered,
        )

    def results(self, pending: PendingScrape) -> list[SiteResult]:
        """What the rounds found, through each round's one `finish`: a round still
        running gives what it has read so far. May wait for the site-wide sources (the
        Kubernetes API) until the scrape's answer is due: call it off the event loop."""
        until = pending.started + pending.budget.rounds_wait
        results: list[SiteResult] = list(pending.undiscovered)
        for site_round, future in zip(pending.rounds, pending.futures, strict=True):
            done = future.done() and not future.cancelled()
            results.extend(site_round.finish(future.result() if done else None, until))
        self._problems.flush()
        return results

    def joins(self) -> int:
        """Scrapes that have joined (or started) a round so far, over every site."""
        with self._lock:
            return sum(entry.flight.joins for entry in self._entries.values())

    def close(self) -> None:
        for discovery in self._discoveries:
            discovery.close()
        for site_round in self.sites:
            site_round.close()
        self.lanes.close()
        self._problems.flush()

    def _add(self, site: SiteConfig) -> None:
        # A network (table_prefix: auto) is split by subsite in its round; others here.
        if not (site.discovers_prefixes or self._shard.owns(site.name)):
            return
        site_round = SiteRound(
            site, self._collectors, self._clock, self._shard, self.lanes, problems=self._problems
        )
        flight = SingleFlight(self.lanes.for_site(site).rounds, site_round.run)
        with self._lock:
            self._entries[site.name] = _Entry(site_round, flight)

    def _discover(self, budget: float) -> list[SiteResult]:
        """Adds the rounds of databases found since the last scrape and drops those of
        databases gone; an entry that found none is reported as down (on one shard)."""
        undiscovered: list[SiteResult] = []
        for discovery in self._discoveries:
            sites, found = discovery.sites(budget)
            prefix = f"{discovery.entry.name}:"
            wanted = {site.name: site for site in sites}
            with self._lock:
                known = {name for name in self._entries if name.startswith(prefix)}
                gone = [self._entries.pop(name) for name in known - wanted.keys()]
            for entry in gone:
                entry.round.close()
            for name in sorted(wanted.keys() - known):
                self._add(wanted[name])
            if not sites and self._shard.owns(discovery.entry.name):
                problem = found.problem or (
                    f"no database matching {discovery.entry.database_pattern!r} has "
                    "Action Scheduler tables that the exporter's user can see"
                    if found.listed
                    else "the databases are being listed"
                )
                undiscovered.append(_down(discovery.entry, problem))
        return undiscovered


def _down(entry: SiteConfig, problem: str) -> SiteResult:
    result = SiteResult(entry.name, entry.labels, up=False, problems=[problem])
    result.samples.append(sample(catalog.UP, False))
    return result
