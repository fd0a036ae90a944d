"""What lives between one site's rounds: its session, its sources, what it knows of its
table prefixes, whether the database answered for each, and each one's plan for its
express reads (`rounds.hot_statement.ExpressPlans`).

`MonitoredSite` owns it and assembles the results from it; each `DatabaseRound` reads and
updates it. One round runs at a time per site (`scrape.lane_rounds`), so only the
results' assembly, in a scrape's thread, reads it beside the round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actionscheduler_exporter.collectors import SiteSources
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.servers import DatabaseServers, ServerLane
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.db.tables import TableStats
from actionscheduler_exporter.rounds.hot_statement import ExpressPlans
from actionscheduler_exporter.sharding import Shard
from actionscheduler_exporter.sources.cached_readings import (
    CachedReadings,
    CachedRefresh,
    RepeatedReadings,
)
from actionscheduler_exporter.sources.database import Collector, check_order
from actionscheduler_exporter.sources.heavy_tier import HeavyTier
from actionscheduler_exporter.sources.problem_log import ProblemLog
from actionscheduler_exporter.sources.reader import SourceReader
from actionscheduler_exporter.sources.site_wide import SiteWideSource
from actionscheduler_exporter.timing import Clock
from actionscheduler_exporter.totals.ledger import PrefixLedgers


@dataclass
class SiteState:
    site: SiteConfig
    shard: Shard
    clock: Clock
    session: Session
    lane: ServerLane | None  # the database server's connections and threads, if pooled
    reader: SourceReader
    in_round: tuple[Collector, ...]  # the collectors read in each round, in order
    heavy: HeavyTier | None  # the collectors refreshed in the background, if any
    site_wide: list[SiteWideSource[Any]]  # read once per scrape for the whole site
    ledgers: PrefixLedgers
    cache: CachedReadings
    # The cached readings come due, read with other stores' of the server.
    refresh: CachedRefresh
    known_prefixes: list[str]
    others_prefixes: int = 0  # discovered subsites served by other shards
    # The statistics a network's listing read with its prefixes, until a round uses them.
    discovered_stats: dict[str, dict[str, TableStats]] = field(default_factory=dict)
    # Each prefix's statistics as a round read them, and the clock time they are good
    # until (`rounds.database_round`: re-read about every five minutes, not in every round).
    kept_stats: dict[str, tuple[float, Mapping[str, TableStats]]] = field(default_factory=dict)
    # Whether the database answered for a site label at the last round that read it.
    answers: dict[str, bool] = field(default_factory=dict)
    # The cached collectors' last readings with the samples reported of them.
    repeated: RepeatedReadings = field(default_factory=RepeatedReadings)
    # The in-round collectors read at most every so often (`Freshness.cached`), by name:
    # it follows from the site's settings, which the state keeps for its life.
    cached: frozenset[str] = frozenset()
    # The in-round collectors read straight from their hot-statement values when their
    # samples follow from them alone (`CollectorsLoop`): those that report no duration,
    # need no other's reading, have no up gauge of their own, and are not `cached`.
    from_values: frozenset[str] = frozenset()
    # The collectors whose readings others need (`Source.needs`).
    needed: frozenset[str] = frozenset()
    # Each prefix's plan for its express reads, while it holds.
    plans: ExpressPlans = field(default_factory=ExpressPlans)
    # Whether a heavy collector is read in the round (heavy_interval 0): only then do its
    # reads walk the whole table's counts.
    heavy_in_round: bool = False
    # `site.discovers_prefixes`, asked several times per round.
    discovers: bool = False
    # The names of `in_round`: a report that read them all reports none as not read.
    in_round_names: frozenset[str] = frozenset()
    # `known_labels`, with the prefixes and the count of others' it was made of.
    _known_labels: tuple[list[str], int, tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        self.discovers = self.site.discovers_prefixes
        self.in_round_names = frozenset(c.name for c in self.in_round)
        self.heavy_in_round = any(c.tier == "heavy" for c in self.in_round)
        self.cached = frozenset(c.name for c in self.in_round if c.freshness(self.site).cached)
        self.from_values = frozenset(
            c.name
            for c in self.in_round
            if not (c.reports_duration or c.needs or c.up_metric or c.name in self.cached)
        )
        self.needed = frozenset(name for c in self.in_round for name in c.needs)

    @classmethod
    def open(
        cls,
        site: SiteConfig,
        clock: Clock,
        sources: SiteSources,
        shard: Shard,
        servers: DatabaseServers | None,
        session: Session | None,
        problems: ProblemLog | None,
    ) -> SiteState:
        """A site's state before its first round (see `MonitoredSite` for the arguments)."""
        lane = servers.for_site(site) if servers else None
        session = session or Session(site, pool=lane.pool if lane else None)
        reader = SourceReader.of_site(clock, problems)
        in_round = sources.in_round
        check_order(in_round)
        ledgers = PrefixLedgers(site.heavy_chunk_rows, site.heavy_settled_check_every)
        background = sources.background
        heavy = HeavyTier(site, background, reader, ledgers, servers) if background else None
        site_wide: list[SiteWideSource[Any]] = [
            SiteWideSource(source, context, site, reader) for source, context in sources.site_wide
        ]
        known = [] if site.discovers_prefixes else [site.table_prefix]
        refresh = CachedRefresh(lane.refresh_together if lane else None, reader, clock)
        return cls(
            site, shard, clock, session, lane, reader, in_round, heavy, site_wide, ledgers,
            CachedReadings(clock), refresh, known,
        )  # fmt: skip

    def site_label(self, prefix: str) -> str:
        return f"{self.site.name}:{prefix}" if self.discovers else self.site.name

    def known_labels(self) -> tuple[str, ...]:
        """The labels of the prefixes known so far, or the whole site's before they are:
        made again when the prefixes are (asked for every site at every scrape)."""
        # Read once: a round may replace them meanwhile, and the labels kept must be those
        # of the prefixes they are kept for.
        prefixes, others = self.known_prefixes, self.others_prefixes
        made = self._known_labels
        if made is None or made[0] is not prefixes or made[1] != others:
            labels = tuple([self.site_label(p) for p in prefixes])
            made = (prefixes, others, labels or self._whole_site_label(others))
            self._known_labels = made
        return made[2]

    def _whole_site_label(self, others_prefixes: int) -> tuple[str, ...]:
        """The label a site is reported under before its subsites are known (or when its
        database is unreachable): on one shard only, as every other series."""
        if others_prefixes or not self.shard.owns(self.site.name):
            return ()
        return (self.site.name,)
