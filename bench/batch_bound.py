"""What a batch design of the rounds could cost at best: a thousand databases read sixteen
stores per statement by the threads that hold the server's connections, each store's
answer turned into its hot samples on the spot, and the whole written by the exporter's
own writer and gzip, timed in turn with the floor.

    python -m bench.batch_bound                    # 30 passes of each, in turn
    python -m bench.batch_bound --passes 60 --no-writing

It is not the exporter and serves nothing: it reads the floor's subqueries (in columns,
the stores of a batch joined by `UNION ALL` and tagged by their place, as the read-ahead
joins them) and makes only the samples those give, reusing a quiet store's unchanged ones
and making its ages and the time counted to it anew at every pass. Every other sample of
a store is the exporter's own, taken from its scrapes before the timing, and those that
changed between its last two scrapes (the collectors' durations, the oldest claim's age;
the heavy tier's ages before 2026-12-07) are made anew at every pass with another value; so the
exposition written is the size of the exporter's and changes in as many places. What the exporter's
rounds spend beyond this, for the same statements' worth of data, is the cost of their
design (docs/performance.md, "Where it stands").

Run it alone: it starts the benchmark's server (.bench/, or `AS_BENCH_MARIADB`) and
prepares the thousand stores once, as `bench.run` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import queue
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pymysql
import yaml

from actionscheduler_exporter.config import load_file
from actionscheduler_exporter.exposition.render import render_parts
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, labels_of, value_of
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.budget import ScrapeBudget
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.scrape.garbage import tune_garbage_collection
from actionscheduler_exporter.web.kept_gzip import KeptGzip
from bench.floor import many_stores_floor, many_stores_statement, side_by_side
from bench.floor_cases import databases_document, thousand_stores_site
from bench.floor_report import least_wall
from bench.many_sites import SITES, prepare
from bench.measure import ms, process_cpu_seconds
from bench.phases import until_heavy_refreshed
from bench.server import ROOT, bench_server
from testbed.accept_headers import PROMETHEUS_ACCEPT
from testbed.generate import PREFIX
from testbed.mariadb import Server

# Stores per statement, and connections: the read-ahead's `BATCH` and the default
# `connections_per_server`.
BATCH = 16
CONNECTIONS = 4
CORES = 2
# The families this pass makes from its statements; the exporter's scrapes give the rest.
MADE_HERE = frozenset(
    {
        catalog.DUE_ACTIONS,
        catalog.IN_PROGRESS,
        catalog.ACTIVE_CLAIMS,
        catalog.CLAIM_ROWS,
        catalog.TABLE_EXISTS,
        catalog.OLDEST_DUE_AGE,
        catalog.OLDEST_IN_PROGRESS_AGE,
        catalog.DATABASE_SECONDS,
        catalog.SCRAPE_DURATION,
    }
)
_UNCLAIMED = labels_of(catalog.DUE_ACTIONS, claim="unclaimed")
_CLAIMED = labels_of(catalog.DUE_ACTIONS, claim="claimed")
_HOT = labels_of(catalog.DATABASE_SECONDS, tier="hot")
_TABLES = tuple(
    labels_of(catalog.TABLE_EXISTS, table=table)
    for table in ("actions", "claims", "groups", "logs")
)


class _Store:
    """A store's last answer, the samples made of it, and its database time so far."""

    __slots__ = ("answer", "made", "seconds")

    def __init__(self) -> None:
        self.answer: tuple[Any, ...] | None = None
        self.made: list[Sample] = []
        self.seconds = 0.0

    def samples(self, answer: tuple[Any, ...], now: float, share: float) -> list[Sample]:
        """The store's hot samples: those of an unchanged answer as they were, the ages
        and the time counted anew."""
        self.seconds += share
        due, oldest_due, claimed, running, oldest_running, active, claims, _newest_log = answer
        if answer != self.answer:
            self.answer = answer
            self.made = [
                Sample(catalog.DUE_ACTIONS, value_of(due - claimed), _UNCLAIMED),
                Sample(catalog.DUE_ACTIONS, value_of(claimed), _CLAIMED),
                Sample(catalog.IN_PROGRESS, value_of(running)),
                Sample(catalog.ACTIVE_CLAIMS, value_of(active)),
                Sample(catalog.CLAIM_ROWS, value_of(claims)),
                *(Sample(catalog.TABLE_EXISTS, 1.0, labels) for labels in _TABLES),
            ]
        return [
            *self.made,
            Sample(catalog.OLDEST_DUE_AGE, _age(now, oldest_due)),
            Sample(catalog.OLDEST_IN_PROGRESS_AGE, _age(now, oldest_running)),
            Sample(catalog.DATABASE_SECONDS, self.seconds, _HOT),
            Sample(catalog.SCRAPE_DURATION, share),
        ]


def _age(now: float, since: object) -> float:
    if not isinstance(since, dt.datetime):
        return 0.0
    return max(0.0, now - since.replace(tzinfo=dt.UTC).timestamp())


@dataclass(frozen=True)
class _Other:
    """A store's samples that the pass does not make, and the places of those the
    exporter changes at every scrape."""

    result: SiteResult
    changing: tuple[int, ...]


class BatchPass:
    """One pass over the thousand databases: the batches read side by side on the
    connections, each answer made into samples by the thread that read it; then, with
    `writing`, the exposition written and gzipped as `/metrics` does."""

    def __init__(
        self,
        connections: Sequence[pymysql.connections.Connection[Any]],
        databases: Sequence[str],
        others: Sequence[_Other],
        writing: bool,
    ) -> None:
        self._connections = connections
        self._batches = [
            (start, _batch_statement(databases[start : start + BATCH]))
            for start in range(0, len(databases), BATCH)
        ]
        self._stores = [_Store() for _ in databases]
        self._made: list[list[Sample]] = [[] for _ in databases]
        self._others = others
        self._writing = writing
        self._gzip = KeptGzip()

    def run(self) -> int:
        """Reads every store; the bytes of the gzipped answer (0 without writing)."""
        work: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
        for batch in self._batches:
            work.put(batch)
        side_by_side([functools.partial(self._drain, c, work) for c in self._connections])
        if not self._writing:
            return 0
        now = time.time()
        results = [
            SiteResult(
                other.result.label, other.result.labels, True, [*_changed(other, now), *made]
            )
            for other, made in zip(self._others, self._made, strict=True)
        ]
        parts, content_type = render_parts(results, PROMETHEUS_ACCEPT)
        return sum(len(piece) for piece in self._gzip.gzipped(parts, content_type))

    def _drain(
        self,
        connection: pymysql.connections.Connection[Any],
        work: queue.SimpleQueue[tuple[int, str]],
    ) -> None:
        with connection.cursor() as cursor:
            while True:
                try:
                    start, sql = work.get_nowait()
                except queue.Empty:
                    return
                started = time.perf_counter()
                cursor.execute(sql)
                rows = cursor.fetchall()
                share = (time.perf_counter() - started) / len(rows)
                now = time.time()
                for row in rows:
                    place = start + row[0]
                    self._made[place] = self._stores[place].samples(tuple(row[1:]), now, share)


def _batch_statement(databases: Sequence[str]) -> str:
    branches = (
        f"SELECT {place}, " + many_stores_statement(database, PREFIX).removeprefix("SELECT ")
        for place, database in enumerate(databases)
    )
    return " UNION ALL ".join(branches)


def _changed(other: _Other, now: float) -> list[Sample]:
    """The store's other samples, those the exporter changed from one scrape to the
    next made anew with another value."""
    samples = list(other.result.samples)
    for place in other.changing:
        item = samples[place]
        samples[place] = dataclasses.replace(item, value=item.value + now % 60)
    return samples


def _exporters_other_samples(server: Server) -> list[_Other]:
    """Each database's samples from the exporter's scrape once its heavy tier has its
    first values, but those `BatchPass` makes, by the databases' order; with the places
    of those whose value changed since its scrape a second before."""
    path = ROOT / ".bench" / "work" / "batch_bound.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = databases_document(thousand_stores_site(server))
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    coordinator = Coordinator(load_file(str(path)))
    try:

        def scrape() -> list[SiteResult]:
            pending = coordinator.begin(ScrapeBudget(10.0))
            pending.wait()
            return pending.results()

        # As a long-running exporter's: with every heavy family.
        until_heavy_refreshed(scrape)
        scrapes = [{result.label: result for result in scrape()}]
        time.sleep(1.0)
        scrapes.append({result.label: result for result in scrape()})
    finally:
        coordinator.close()
    troubled = [r.label for s in scrapes for r in s.values() if not r.up or r.problems]
    if troubled:
        raise SystemExit(f"the exporter's scrapes were not whole: {troubled[:5]} (and others)")
    others = []
    for index in range(SITES):
        label = f"db{index}"
        kept = [item for item in scrapes[1][label].samples if item.metric not in MADE_HERE]
        before = {
            (item.metric, item.labels, item.suffix): item.value
            for item in scrapes[0][label].samples
            if item.metric not in MADE_HERE
        }
        changing = tuple(
            place
            for place, item in enumerate(kept)
            if before.get((item.metric, item.labels, item.suffix)) != item.value
        )
        others.append(_Other(SiteResult(label, scrapes[1][label].labels, True, kept), changing))
    return others


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=30, help="timed passes of each, in turn")
    parser.add_argument(
        "--no-writing", action="store_true", help="read and make samples only, write nothing"
    )
    arguments = parser.parse_args()
    tune_garbage_collection()
    with bench_server() as server:
        prepare([server], spread=False)
        databases = [f"one_db_{index}" for index in range(SITES)]
        others = _exporters_other_samples(server)
        changing = {
            other.result.samples[place].metric.name for other in others for place in other.changing
        }
        per_store = statistics.mean(len(other.changing) for other in others)
        print(f"the exporter's samples made anew per store, beyond the pass's: {per_store:.1f}, of")
        print(", ".join(sorted(changing)))
        _measure(server, databases, others, arguments.passes, not arguments.no_writing)


def _measure(
    server: Server,
    databases: list[str],
    others: list[_Other],
    passes: int,
    writing: bool,
) -> None:
    assert server.process is not None, "the benchmark's own server"
    pid = server.process.pid
    connections = [server.connect() for _ in range(CONNECTIONS)]
    batch_pass = BatchPass(connections, databases, others, writing)
    statements = [many_stores_statement(database, PREFIX) for database in databases]
    timings: dict[str, list[tuple[float, float, float]]] = {"floor": [], "batch pass": []}
    with many_stores_floor(server.connect, statements, CONNECTIONS) as floor:
        answered = 0
        for _ in range(3):
            floor.run()
            answered = batch_pass.run()
        for _ in range(passes):
            for name, call in (("floor", floor.run), ("batch pass", batch_pass.run)):
                server_cpu, client_cpu = process_cpu_seconds(pid), time.process_time()
                started = time.perf_counter()
                call()
                timings[name].append(
                    (
                        time.perf_counter() - started,
                        time.process_time() - client_cpu,
                        process_cpu_seconds(pid) - server_cpu,
                    )
                )
                time.sleep(0.1)
    for connection in connections:
        connection.close()
    _report(timings, passes, writing, answered)


def _report(
    timings: dict[str, list[tuple[float, float, float]]], passes: int, writing: bool, size: int
) -> None:
    floor_wall = statistics.median(wall for wall, _, _ in timings["floor"])
    what = "written and gzipped" if writing else "not written"
    print(f"1,000 databases, {passes} passes of each in turn ({what}; {size:,} bytes gzipped):")
    print("| call | wall median | client CPU | server CPU | least wall | ratio to the floor |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, rows in timings.items():
        wall = statistics.median(row[0] for row in rows)
        client = statistics.mean(row[1] for row in rows)
        server = statistics.mean(row[2] for row in rows)
        least = least_wall(server, client, CORES, apart=False)
        print(
            f"| {name} | {ms(wall)} | {ms(client)} | {ms(server)} | {ms(least)} "
            f"| {wall / floor_wall:.2f}x |"
        )


if __name__ == "__main__":
    main()
