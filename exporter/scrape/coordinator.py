"""Runs one round per site for a scrape, sharing rounds between concurrent scrapes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait

from exporter.collectors import default_collectors
from exporter.collectors.base import Collector
from exporter.config.model import ExporterConfig
from exporter.scrape.result import SiteResult
from exporter.scrape.singleflight import SingleFlight
from exporter.scrape.target import Target

DEFAULT_SCRAPE_TIMEOUT = 10.0
# Rounds of different sites run side by side, up to this many at once.
MAX_PARALLEL_SITES = 16


class Coordinator:
    def __init__(self, config: ExporterConfig,
                 collectors: Sequence[Collector] | None = None) -> None:
        chosen = tuple(collectors) if collectors is not None else default_collectors()
        self.config = config
        self.targets = [Target(site, chosen) for site in config.sites]
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, min(len(self.targets), MAX_PARALLEL_SITES)),
            thread_name_prefix="round",
        )
        self._flights = [SingleFlight(self._executor, target.run) for target in self.targets]

    def scrape(self, timeout: float = DEFAULT_SCRAPE_TIMEOUT) -> list[SiteResult]:
        started = time.monotonic()
        deadline = started + timeout
        futures = [flight.join(deadline) for flight in self._flights]
        wait(futures, timeout=timeout)
        results: list[SiteResult] = []
        for target, future in zip(self.targets, futures, strict=True):
            if future.done():
                results.extend(future.result())
            else:
                results.extend(target.timed_out(time.monotonic() - started))
        return results

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        for target in self.targets:
            target.close()
