"""A server's connections under pressure: what a thousand databases' exporter does with its
`connections_per_server` (4) when tables are cold, scrapes come back to back and the
machine may be busy.

    python -m bench.pool_turns                  # 3 first scrapes, a minute back to back
    python -m bench.pool_turns --first 5 --minute 120

1. First scrapes: a new exporter (in this process) for each, on a server whose open tables
   were just closed (`FLUSH TABLES`), one scrape with Prometheus' default 10 s timeout:
   its time and the exporter's CPU, and the sites reported down, by why: a round that
   waited its whole query timeout for one of the server's connections ("stayed busy"),
   the deadline before the round reached them, or another.
2. Back-to-back scrapes for `--minute` seconds (each begun when the last ended), after the
   heavy tier's first refresh, refreshed every 10 s: the connections the server accepted
   meanwhile (its `Connections` status: the benchmark's own server, where nothing else
   connects; the watcher's one connection is made before), the most the exporter's user
   held at once, the heavy refreshes that completed (a heavy collector's read time moved on), and
   the sites reported down.

Run it beside a load to see what a busy machine does (the load average is printed). It
starts the benchmark's server (.bench/, or `AS_BENCH_MARIADB`) and prepares the thousand
stores once, as `bench.run` does: not while `bench.run` uses the same data directory.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pymysql
import yaml

from actionscheduler_exporter.config import load_file
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site import NOT_REACHED
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.scrape.garbage import tune_garbage_collection
from bench.floor_cases import databases_document, thousand_stores_site
from bench.many_sites import USER, prepare
from bench.phases import heavy_refreshed
from bench.server import ROOT, bench_server

TIMEOUT = 10.0  # Prometheus' default scrape timeout
BUSY = "stayed busy"  # a round that waited its whole query timeout for a connection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first", type=int, default=3, help="first scrapes, a new exporter each")
    parser.add_argument("--minute", type=float, default=60.0, help="seconds back to back (0: none)")
    arguments = parser.parse_args()
    tune_garbage_collection()
    with bench_server() as server:
        prepare([server], spread=False)
        document = databases_document({**thousand_stores_site(server), "heavy_interval": "10s"})
        path = ROOT / ".bench" / "work" / "pool_turns.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        with server.connect() as watcher:
            for number in range(1, arguments.first + 1):
                print(f"first scrape {number}: {_first_scrape(path, watcher)}", flush=True)
            if arguments.minute > 0:
                print(_back_to_back(path, watcher, arguments.minute), flush=True)


def _first_scrape(path: Path, watcher: pymysql.connections.Connection[Any]) -> str:
    with watcher.cursor() as cursor:
        cursor.execute("FLUSH TABLES")
    coordinator = Coordinator(load_file(str(path)))
    try:
        started, cpu = time.perf_counter(), time.process_time()
        results = coordinator.scrape(TIMEOUT)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        coordinator.close()
    return f"{seconds:.2f} s (the exporter's CPU {cpu:.2f} s), {_down(results)}, {_load()}"


def _back_to_back(path: Path, watcher: pymysql.connections.Connection[Any], seconds: float) -> str:
    coordinator = Coordinator(load_file(str(path)))
    try:
        while not heavy_refreshed(coordinator.scrape(TIMEOUT)):
            time.sleep(1.0)
        read_at: dict[str, float] = {}
        refreshes, scrapes, down = 0, 0, Counter[str]()
        accepted = _accepted(watcher)
        held = _Held(watcher)
        with held:
            started = time.monotonic()
            while time.monotonic() - started < seconds:
                results = coordinator.scrape(TIMEOUT)
                scrapes += 1
                refreshes += _refreshed(results, read_at)
                down.update(_reasons(results))
        accepted = _accepted(watcher) - accepted
    finally:
        coordinator.close()
    return (
        f"{seconds:.0f} s back to back: {scrapes} scrapes, {accepted} connections accepted, "
        f"at most {held.most} held, {refreshes} heavy refreshes, "
        f"{sum(down.values())} sites down ({dict(down)}), {_load()}"
    )


def _refreshed(results: list[SiteResult], read_at: dict[str, float]) -> int:
    """How many sites' heavy values are newer than at the last look (`read_at` kept)."""
    count = 0
    for result in results:
        latest = max(
            (
                item.value
                for item in result.samples
                if item.metric is catalog.COLLECTOR_LAST_SUCCESS
            ),
            default=None,
        )
        if latest is None:
            continue
        if result.label in read_at and latest > read_at[result.label]:
            count += 1
        read_at[result.label] = latest
    return count


def _reasons(results: list[SiteResult]) -> Counter[str]:
    """The sites reported down, by why: a round that waited its whole query timeout for a
    connection, the scrape's deadline before the round reached the site, or another."""
    return Counter(_reason(result.problems) for result in results if not result.up)


def _reason(problems: list[str]) -> str:
    if any(BUSY in problem for problem in problems):
        return "busy pool"
    if any(problem.startswith(NOT_REACHED) for problem in problems):
        return "not reached"
    return "other"


def _down(results: list[SiteResult]) -> str:
    reasons = _reasons(results)
    return f"{sum(reasons.values())} sites down ({dict(reasons)})"


def _accepted(watcher: pymysql.connections.Connection[Any]) -> int:
    with watcher.cursor() as cursor:
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
        row = cursor.fetchone()
        return int(row[1]) if row else 0


def _load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


class _Held:
    """The most connections the exporter's user held at once, sampled every 50 ms."""

    def __init__(self, watcher: pymysql.connections.Connection[Any]) -> None:
        self._watcher = watcher
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.most = 0

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            with self._watcher.cursor() as cursor:
                cursor.execute(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (USER,)
                )
                row = cursor.fetchone()
                self.most = max(self.most, int(row[0]) if row else 0)


if __name__ == "__main__":
    main()
