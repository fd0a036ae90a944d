"""Runs one round per site for a scrape, sharing rounds between concurrent scrapes: each
server's sites a run at a time (`lane_rounds`).

`begin` joins (or starts) every site's round and returns the `PendingScrape`; the HTTP
handler awaits it, `scrape` blocks on it (the `check` command, tests): one protocol.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.config.model import ExporterConfig, SiteConfig
from actionscheduler_exporter.db.servers import DatabaseServers, server_of
from actionscheduler_exporter.rounds.result import SiteResult, down
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.scrape.budget import (
    DEFAULT_SCRAPE_TIMEOUT,
    ScrapeBudget,
    after_scrapes_in_flight,
)
from actionscheduler_exporter.scrape.discovery import DatabaseDiscovery
from actionscheduler_exporter.scrape.lane_rounds import LaneRounds, RoundsRun
from actionscheduler_exporter.scrape.pending import PendingScrape
from actionscheduler_exporter.sources.database import Collector
from actionscheduler_exporter.sources.problem_log import ProblemLog
from actionscheduler_exporter.timing import Clock, Deadline


@dataclass
class _Entry:
    site: MonitoredSite
    rounds: LaneRounds  # its server's


class Coordinator:
    def __init__(
        self,
        config: ExporterConfig,
        extra_collectors: Sequence[Collector] = (),
        clock: Clock = time.monotonic,
    ) -> None:
        """`extra_collectors`: read for every site after the exporter's own (tests)."""
        self._extra = tuple(extra_collectors)
        self.config = config
        self._clock = clock
        self._shard = config.shard
        # Rounds run in their database server's lane, at most connections_per_server at once.
        self.servers = DatabaseServers(config.connections_per_server)
        self._entries: dict[str, _Entry] = {}
        self._lanes: dict[str, LaneRounds] = {}  # by server
        # Problems of every site, written once per scrape (a line for many sites).
        self._problems = ProblemLog(buffered=True)
        self._lock = threading.Lock()
        self._discoveries = [
            DatabaseDiscovery(site, self.servers, clock)
            for site in config.sites
            if site.discovers_databases
        ]
        for site in config.sites:
            if not site.discovers_databases:
                self._add(site)

    @property
    def sites(self) -> list[MonitoredSite]:
        with self._lock:
            return [entry.site for entry in self._entries.values()]

    def scrape(self, timeout: float = DEFAULT_SCRAPE_TIMEOUT) -> list[SiteResult]:
        """One scrape with the scraper's `timeout`, blocking (the `check` command, tests)."""
        pending = self.begin(ScrapeBudget(timeout))
        pending.wait()
        return pending.results()

    def begin(self, budget: ScrapeBudget, *, wait_for_listings: bool = True) -> PendingScrape:
        """Joins (or starts) each site's round; does not wait for them. A round runs until
        the scrape's `round_runs_until` (see `scrape.budget`); listing the databases of a
        `database: auto` entry for the first time may wait: call it off the event loop, or
        without `wait_for_listings` (an entry not listed yet is then reported as being
        listed)."""
        deadlines = budget.start(self._clock)
        discovery = (
            deadlines.discovery if wait_for_listings else Deadline(self._clock(), self._clock)
        )
        undiscovered = self._discover(discovery)
        with self._lock:
            entries = list(self._entries.values())
        return PendingScrape(
            deadlines,
            [entry.site for entry in entries],
            _joined(entries, deadlines.round_runs_until),
            undiscovered,
            self._problems.flush,
        )

    @property
    def begin_may_wait(self) -> bool:
        """Whether `begin` may wait (a `database: auto` entry's first listing)."""
        return any(discovery.may_wait for discovery in self._discoveries)

    def reconfigure(self, config: ExporterConfig) -> bool:
        """Serves `config` from the next scrape on, keeping every site whose settings did
        not change as it is (its counters, log cursors, heavy totals and connections); a
        changed site starts again, a removed one is closed once the scrapes that use it
        have answered. False, changing nothing, when the change needs a new coordinator:
        another connections_per_server or shard."""
        if (config.connections_per_server, config.shard) != (
            self.config.connections_per_server,
            self.config.shard,
        ):
            return False
        kept_entries = {site for site in config.sites if site in self.config.sites}
        with self._lock:
            old = self._entries
            self._entries = {}
            for name, entry in old.items():
                if entry.site.site in kept_entries or self._discovered_from(name, config):
                    self._entries[name] = entry
            dropped = [entry for name, entry in old.items() if name not in self._entries]
            discoveries = self._discoveries
            self._discoveries = [d for d in discoveries if d.entry in config.sites]
            gone = [d for d in discoveries if d not in self._discoveries]
            self.config = config
        known = {d.entry for d in self._discoveries}
        for site in config.sites:
            if site.discovers_databases and site not in known:
                self._discoveries.append(DatabaseDiscovery(site, self.servers, self._clock))
            elif not site.discovers_databases and site.name not in self._entries:
                self._add(site)
        # Scrapes that joined the old sites' rounds finish with them first.
        closing = [entry.site.close for entry in dropped] + [d.close for d in gone]
        after_scrapes_in_flight(lambda: _close_all(closing))
        return True

    def _discovered_from(self, name: str, config: ExporterConfig) -> bool:
        """Whether `name` is a site found by a discovery entry that `config` keeps."""
        return any(
            name.startswith(f"{d.entry.name}:") and d.entry in config.sites
            for d in self._discoveries
        )

    def joins(self) -> int:
        """Scrapes that have joined (or started) a round so far, over every site."""
        with self._lock:
            return sum(lane.joins for lane in self._lanes.values())

    def close(self) -> None:
        for discovery in self._discoveries:
            discovery.close()
        with self._lock:
            lanes = list(self._lanes.values())
        for lane in lanes:  # no site is read once closed; a round running ends as it will
            lane.close()
        for site in self.sites:
            site.close()
        self.servers.close()
        self._problems.flush()

    def _add(self, site: SiteConfig) -> None:
        # A network (table_prefix: auto) is split by subsite in its round; others here.
        if not (site.discovers_prefixes or self._shard.owns(site.name)):
            return
        monitored = MonitoredSite(
            site,
            self._clock,
            sources=site_sources(site, self._clock).adding(self._extra),
            shard=self._shard,
            servers=self.servers,
            problems=self._problems,
        )
        server = server_of(site)
        with self._lock:
            rounds = self._lanes.get(server)
            if rounds is None:
                executor = self.servers.for_site(site).rounds
                workers = self.config.connections_per_server
                rounds = self._lanes[server] = LaneRounds(executor, workers, self._clock)
            self._entries[site.name] = _Entry(monitored, rounds)

    def _discover(self, until: Deadline) -> list[SiteResult]:
        """Adds the rounds of databases found since the last scrape and drops those of
        databases gone; an entry that found none is reported as down (on one shard)."""
        undiscovered: list[SiteResult] = []
        for discovery in self._discoveries:
            sites, found = discovery.sites(until)
            prefix = f"{discovery.entry.name}:"
            wanted = {site.name: site for site in sites}
            with self._lock:
                known = {name for name in self._entries if name.startswith(prefix)}
                gone = [self._entries.pop(name) for name in known - wanted.keys()]
            if gone:  # its round may be in a statement: closed without waiting for it
                closing = threading.Thread(
                    target=_close_all, args=([entry.site.close for entry in gone],), daemon=True
                )
                closing.start()
            for name in sorted(wanted.keys() - known):
                self._add(wanted[name])
            if not sites and self._shard.owns(discovery.entry.name):
                problem = found.problem or (
                    f"no database matching {discovery.entry.database_pattern!r} has "
                    "Action Scheduler tables that the exporter's user can see"
                    if found.listed
                    else "the databases are being listed"
                )
                undiscovered.append(down(discovery.entry.name, discovery.entry.labels, problem))
        return undiscovered


def _joined(entries: list[_Entry], runs_until: float) -> list[RoundsRun]:
    """Each entry's run, in the entries' order: every server's sites joined at once."""
    by_lane: dict[LaneRounds, list[int]] = {}
    for place, entry in enumerate(entries):
        by_lane.setdefault(entry.rounds, []).append(place)
    runs: dict[int, RoundsRun] = {}
    for lane, places in by_lane.items():
        joined = lane.join([entries[place].site for place in places], runs_until)
        runs.update(zip(places, joined, strict=True))
    return [runs[place] for place in range(len(entries))]


def _close_all(closing: list[Callable[[], None]]) -> None:
    for close in closing:
        close()
