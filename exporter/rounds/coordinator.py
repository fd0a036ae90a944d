"""Runs one round per site for a scrape, sharing rounds between concurrent scrapes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from exporter.collectors import default_collectors
from exporter.collectors.context import Collector
from exporter.config.model import ExporterConfig
from exporter.rounds.result import SiteResult
from exporter.rounds.singleflight import SingleFlight
from exporter.rounds.site_round import SiteRound
from exporter.sources.source import Clock

DEFAULT_SCRAPE_TIMEOUT = 10.0
# The least time a round may take before it skips what is left (see begin).
MIN_ROUND_SECONDS = DEFAULT_SCRAPE_TIMEOUT - 0.5
# Rounds of different sites run side by side, up to this many at once.
MAX_PARALLEL_SITES = 16


@dataclass(frozen=True)
class PendingScrape:
    started: float
    futures: list[Future[list[SiteResult]]]


class Coordinator:
    def __init__(
        self,
        config: ExporterConfig,
        collectors: Sequence[Collector] | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        chosen = tuple(collectors) if collectors is not None else default_collectors()
        self.config = config
        self._clock = clock
        shard = config.shard
        # A network (table_prefix: auto) is split by subsite, in its round; others here.
        self.sites = [
            SiteRound(site, chosen, clock, shard)
            for site in config.sites
            if site.discovers_prefixes or shard.owns(site.name)
        ]
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, min(len(self.sites), MAX_PARALLEL_SITES)),
            thread_name_prefix="round",
        )
        self._flights = [SingleFlight(self._executor, site_round.run) for site_round in self.sites]

    def scrape(self, timeout: float = DEFAULT_SCRAPE_TIMEOUT) -> list[SiteResult]:
        pending = self.begin(timeout)
        wait(pending.futures, timeout=timeout)
        return self.results(pending)

    def begin(self, timeout: float) -> PendingScrape:
        """Joins (or starts) each site's round; does not wait for them.

        A round may run for at least MIN_ROUND_SECONDS, whatever the timeout of the scrape
        that starts it: a scrape with a tiny timeout gets what is read by then, and does
        not cut the round short for the scrapes that join it."""
        started = self._clock()
        deadline = started + max(timeout, MIN_ROUND_SECONDS)
        return PendingScrape(started, [flight.join(deadline) for flight in self._flights])

    def results(self, pending: PendingScrape) -> list[SiteResult]:
        """What the rounds found; a round still running counts as past the deadline."""
        results: list[SiteResult] = []
        for site_round, future in zip(self.sites, pending.futures, strict=True):
            if future.done():
                results.extend(future.result())
            else:
                results.extend(site_round.timed_out(self._clock() - pending.started))
        return results

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        for site_round in self.sites:
            site_round.close()
