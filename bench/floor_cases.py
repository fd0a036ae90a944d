"""The exporter against the floor (`bench.floor`), timed in turn in one run: one store of
each size, and a thousand stores in two forms (a database each, or subsites of one
network). With `AS_BENCH_BASELINE`, the baseline checkout's exporter runs at the same
time, its scrapes interleaved with this one's and with the floor's.

The exporters run with their default configuration (the due split re-read every 30 s, as
a site has it unless told otherwise): the floor reads no split, and what the floor does
not read an exporter may read less often. This benchmark scrapes a thousand stores every
second or so, where Prometheus scrapes every 30 s or minute: at that pace a 30 s split is
re-read at most scrapes (every scrape from a 37.5 s interval on, three stores in four at
30 s), and the benchmark's own pace re-reads a tenth of them. The thousand databases are
measured twice more, for information beside the targets (judged at the defaults): with
the split due at every scrape (`due_split_interval: 100ms`), as at Prometheus' pace, where
a backlog that has not changed since its split is renewed without a statement (the
benchmark's stores' backlogs wait: none runs them); and with the split read at every
scrape (`due_split_interval: 0`), as a backlog that changes between any two scrapes is;
and scraped in the protobuf format. Both forms are measured once more served by two
shards that divide the connections (`SHARDS`), also beside the targets.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from bench.exporters import BASELINE, Running, Shards, bench_site, exporter_for, sharded_exporters
from bench.floor import many_stores_floor, many_stores_statement, one_store_statements, replay_one
from bench.many_sites import (
    BASELINE_USER,
    NETWORK,
    PASSWORD,
    SITES,
    USER,
    connections_watched,
    sites_up,
    wait_heavy,
)
from bench.measure import (
    Timings,
    heavy_reads,
    metric_values,
    ms,
    process_cpu_seconds,
    proportional_mib,
    resident_mib,
)
from bench.replay import captured, replay_against_floor
from testbed.generate import PREFIX
from testbed.mariadb import Server
from testbed.store_profile import StoreProfile

# A scrape of one store takes milliseconds: 60 rounds left its median moving by 0.15 of a
# ratio from one run to the next on a noisy machine, 300 rounds take seconds even at 10M.
ONE_STORE_ROUNDS = 300
MANY_STORES_ROUNDS = 20
WARM_UP = 5
CONNECTIONS = 4  # connections_per_server's default: the floor's budget too
# The thousand databases with each store's due split due at every scrape, as at
# Prometheus' pace (see above): its interval passes between any two scrapes, and a backlog
# that has not changed is renewed; and read at every scrape (`due_split_interval: 0`), as
# a backlog that changes between any two scrapes is.
AT_PROMETHEUS_PACE = f"{SITES} databases, split due at every scrape"
SPLIT_READ_EACH_TIME = f"{SITES} databases, split read at every scrape"
# The thousand databases scraped as Prometheus does with native histograms enabled: the
# protobuf exposition, encoded by its own writer (`exposition.protobuf`).
PROTOBUF = f"{SITES} databases, protobuf"
# The thousand stores served by two exporters that share them (`--total-shards 2`, the
# chart's `sharding`), each with half the connections (the server sees no more than one
# exporter's), scraped at once as Prometheus scrapes each shard's target: for information
# beside the targets, which are one exporter's (docs/performance.md, "Two shards at the
# floor").
SHARDS = 2
DATABASES_SHARDED = f"{SITES} databases, {SHARDS} shards"
SUBSITES_SHARDED = f"{SITES} subsites, {SHARDS} shards"
NOT_JUDGED = (
    AT_PROMETHEUS_PACE,
    SPLIT_READ_EACH_TIME,
    PROTOBUF,
    DATABASES_SHARDED,
    SUBSITES_SHARDED,
)
# Which exporter starts first in the first set-up (`many_stores_floor_case`).
BASELINE_FIRST = os.environ.get("AS_BENCH_BASELINE_FIRST", "") not in ("", "0")
# `AS_BENCH_STEADY=<seconds>`: the thousand stores' exporters are scraped (in turn, about
# once a second each) until they have run that long before the timed rounds start. By
# default the timed rounds fall in an exporter's first minute or so, before any store's
# periodic in-round reads (its tables' statistics, its anomalies) come due: a
# long-running exporter's steady state is past 1.25 times the longest interval.
STEADY_SECONDS = float(os.environ.get("AS_BENCH_STEADY", "0") or 0)
# `AS_BENCH_SETUPS=<name>,<name>`: only those thousand-store set-ups (their names as the
# tables print them); all by default.
# A comma followed by a space is a name's own ("1000 databases, protobuf"): split
# at the others, or such a set-up could not be named.
SETUPS = [name for name in re.split(r",(?! )", os.environ.get("AS_BENCH_SETUPS", "")) if name]


def _exporter_setting(name: str) -> int | None:
    """A whole number from 1 in the environment variable `name`, or None when unset."""
    text = os.environ.get(name, "")
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise SystemExit(f"{name} must be a whole number from 1, not {text!r}")
    return int(text)


# `AS_BENCH_CONNECTIONS=<n>`: this checkout's exporter runs the thousand-store set-ups
# with `connections_per_server: n`, the baseline's and the floor's keep the default's
# `CONNECTIONS`: how many rounds at once suit the machine (docs/performance.md, "Rounds
# at once").
EXPORTER_CONNECTIONS = _exporter_setting("AS_BENCH_CONNECTIONS")
# `AS_BENCH_PROCESSES=<n>`: this checkout's exporter runs them with `processes: n` (its
# helper processes' CPU and memory counted with it); the baseline's keeps its default.
EXPORTER_PROCESSES = _exporter_setting("AS_BENCH_PROCESSES")


def _floor_together(text: str) -> bool:
    """`AS_BENCH_FLOOR_TOGETHER=1`: the thousand stores' floor reads the values of one pass
    over the same rows in one subquery, as the exporter does (`many_stores_statement`):
    the floor of the statements as the exporter now shapes them."""
    if text not in ("", "0", "1"):
        raise SystemExit(f"AS_BENCH_FLOOR_TOGETHER must be 1 or 0, not {text!r}")
    return text == "1"


FLOOR_TOGETHER = _floor_together(os.environ.get("AS_BENCH_FLOOR_TOGETHER", ""))


def _exporters() -> list[tuple[str, Path | None]]:
    return [("exporter", None), *([("baseline", Path(BASELINE))] if BASELINE else [])]


def one_store_floor_case(server: Server, profile: StoreProfile, workdir: Path) -> dict[str, Any]:
    """Every exporter (this checkout's, and the baseline's) running at once, their rounds
    interleaved: floor, a scrape of one, floor, a scrape of the next. A moment when the
    machine is slow falls on all of them alike, as it does not on one block of rounds
    after another (the same code measured 1.29 and 1.33 times the floor so)."""
    database = profile.name
    statements = one_store_statements(PREFIX)
    site = bench_site(server, database, heavy_interval="1h")
    result: dict[str, Any] = {"store": database, "actions": profile.actions}
    with server.connect(database) as connection, contextlib.ExitStack() as stack:
        floor = partial(replay_one, connection, statements)
        document = {"sites": [site]}
        running = {
            name: stack.enter_context(exporter_for(document, workdir, name=name, source=source))
            for name, source in _exporters()
        }
        for exporter in running.values():
            _wait_heavy(exporter)
            for _ in range(WARM_UP):
                exporter.scrape()
                floor()
        before = {name: _database_seconds(exporter.scrape()) for name, exporter in running.items()}
        timed = _alternated(
            {name: exporter.scrape for name, exporter in running.items()}, floor, ONE_STORE_ROUNDS
        )
        for name, exporter in running.items():
            after = _database_seconds(exporter.scrape())
            ours, floors = timed[name]
            rss, peak = resident_mib(exporter.process.pid)
            result[name] = {
                "scrape": ours.as_dict(),
                "floor": floors.as_dict(),
                "ratio_median": ours.median / floors.median,
                "ratio_p95": ours.p95 / floors.p95,
                "database_s_per_scrape": {
                    tier: (after.get(tier, 0.0) - before[name].get(tier, 0.0))
                    / (ONE_STORE_ROUNDS + 1)
                    for tier in after
                },
                "rss_mib": rss,
                "rss_peak_mib": peak,
            }
            print(f"  {name}: {summary_line(result[name])}", flush=True)
    return result


def many_stores_floor_case(server: Server, workdir: Path) -> dict[str, Any]:
    """1,000 databases (a site entry each) and 1,000 subsites, on one server."""
    site = thousand_stores_site(server)
    statement = partial(many_stores_statement, together=FLOOR_TOGETHER)
    databases = [statement(f"one_db_{index}", PREFIX) for index in range(SITES)]
    subsites = [statement(NETWORK, f"wp_{index}_") for index in range(2, SITES + 2)]
    setups: dict[str, tuple[dict[str, Any], list[str]]] = {
        f"{SITES} databases": (databases_document(site), databases),
        f"{SITES} subsites": (network_document(site), subsites),
        AT_PROMETHEUS_PACE: (
            databases_document({**site, "due_split_interval": "100ms"}),
            databases,
        ),
        SPLIT_READ_EACH_TIME: (databases_document({**site, "due_split_interval": 0}), databases),
        PROTOBUF: (databases_document(site), databases),
        DATABASES_SHARDED: (databases_document(site), databases),
        SUBSITES_SHARDED: (network_document(site), subsites),
    }
    measured: dict[str, Any] = {}
    unknown = [name for name in SETUPS if name not in setups]
    if unknown:
        raise SystemExit(f"AS_BENCH_SETUPS: no set-up named {unknown}; there are {list(setups)}")
    for number, (setup, (document, statements)) in enumerate(setups.items()):
        if SETUPS and setup not in SETUPS:
            continue
        print(f"  {setup}: against the floor ...", flush=True)
        # The exporter started first spends more CPU per scrape on the same work (15 to
        # 30 ms of a thousand databases' 560 to 620, whichever code it runs), and its
        # first scrape meets the colder server: every other set-up, the baseline is
        # first, and with AS_BENCH_BASELINE_FIRST=1 in the others (a run of each order
        # has each set-up both ways).
        baseline_first = number % 2 == (0 if BASELINE_FIRST else 1)
        measured[setup] = _many(
            server,
            document,
            statements,
            workdir,
            setup == PROTOBUF,
            baseline_first,
            shards=SHARDS if setup in (DATABASES_SHARDED, SUBSITES_SHARDED) else 1,
        )
        for name, result in measured[setup].items():
            print(f"  {setup}: {name}: {summary_line(result)}", flush=True)
    return measured


def thousand_stores_site(server: Server) -> dict[str, Any]:
    """What every site entry of the thousand stores' set-ups has: the server, the
    benchmark's reader, and the heavy tier refreshed once at start (and waited for: its
    cost is not the hot scrape's, `bench.heavy` measures it, and it shares the
    connections)."""
    return {
        "host": server.host,
        "port": server.port,
        "user": USER,
        "password": PASSWORD,
        "heavy_interval": "1h",
    }


def databases_document(site: dict[str, Any]) -> dict[str, Any]:
    """A site entry for each of the thousand databases."""
    return {
        "sites": [
            {**site, "name": f"db{index}", "database": f"one_db_{index}"} for index in range(SITES)
        ]
    }


def network_document(site: dict[str, Any]) -> dict[str, Any]:
    """One site entry for the network of a thousand subsites."""
    return {"sites": [{**site, "name": "net", "database": NETWORK, "table_prefix": "auto"}]}


def _many(
    server: Server,
    document: dict[str, Any],
    statements: list[str],
    workdir: Path,
    protobuf: bool = False,
    baseline_first: bool = False,
    shards: int = 1,
) -> dict[str, dict[str, Any]]:
    """Every exporter (this checkout's, and the baseline's) running at once, each as its
    own database user (its connections counted apart), their scrapes interleaved with the
    floor's as in the one-store case: one after the other, a quiet or a loaded moment of
    the machine decided their comparison (2.02 against 1.85 times the floor one way, 1.78
    against 1.96 the other, in one run). With `protobuf`, scraped in that format; with
    `baseline_first`, the baseline's exporter is started and first scraped first; with
    `shards`, each is that many exporters sharing the sites and the connections
    (`SHARDS`), scraped at once, their CPU and memory summed."""
    users = {"exporter": USER, "baseline": BASELINE_USER}
    with (
        many_stores_floor(server.connect, statements, CONNECTIONS) as floor,
        contextlib.ExitStack() as stack,
    ):
        running: dict[str, Running | Shards] = {}
        most: dict[str, dict[str, int]] = {}
        started_at = time.monotonic()
        exporters = _exporters()
        for name, source in reversed(exporters) if baseline_first else exporters:
            most[name] = stack.enter_context(connections_watched([server], users[name]))
            own: dict[str, Any] = {
                "sites": [{**site, "user": users[name]} for site in document["sites"]]
            }
            if name == "exporter" and EXPORTER_CONNECTIONS is not None:
                own["connections_per_server"] = EXPORTER_CONNECTIONS
            if name == "exporter" and EXPORTER_PROCESSES is not None:
                own["processes"] = EXPORTER_PROCESSES
            if shards > 1:
                connections = own.get("connections_per_server", CONNECTIONS)
                own["connections_per_server"] = max(1, connections // shards)
                running[name] = stack.enter_context(
                    sharded_exporters(own, workdir, shards, name=name, source=source)
                )
            else:
                running[name] = stack.enter_context(
                    exporter_for(own, workdir, name=name, source=source)
                )
        scrapes: dict[str, Callable[[], object]] = {
            name: exporter.scrape_protobuf if protobuf else exporter.scrape
            for name, exporter in running.items()
        }
        first: dict[str, tuple[float, int, float | None]] = {}
        for name, exporter in running.items():
            # The server as a shop's is when an exporter starts: its tables opened once.
            # The exporter timed first otherwise opened all of them for the next.
            floor.run()
            started = time.perf_counter()
            answer = scrapes[name]()
            first[name] = (
                time.perf_counter() - started,
                sites_up(answer),
                wait_heavy(exporter, len(statements)),
            )
        floor.run()
        while time.monotonic() - started_at < STEADY_SECONDS:
            for scrape in scrapes.values():
                scrape()
                time.sleep(1.0)
        cpu = (
            {name: CpuAccount(server.process.pid, r.pids) for name, r in running.items()}
            if server.process
            else None
        )
        timed = _alternated(
            scrapes,
            floor.run,
            MANY_STORES_ROUNDS,
            cpu,
        )
        # The same scrape's statements without the exporter: what their shape costs,
        # replayed in the network's database when there is one.
        databases = {site["database"] for site in document["sites"]}
        replay_in = next(iter(databases)) if len(databases) == 1 else None
        measured: dict[str, dict[str, Any]] = {}
        for name, _ in exporters:  # in the tables' order, whichever started first
            exporter = running[name]
            ours, floors = timed[name]
            replayed = (
                replay_against_floor(
                    server, captured(server, scrapes[name], users[name]), floor, replay_in
                )
                if server.process
                else None
            )
            up = sites_up(scrapes[name]())
            pids = exporter.pids
            rss, peak = map(sum, zip(*map(resident_mib, pids), strict=True))
            first_s, first_up, heavy_s = first[name]
            measured[name] = {
                "sites": len(statements),
                "first_scrape_s": first_s,
                "first_scrape_sites_up": first_up,
                "heavy_all_refreshed_s": heavy_s,
                "sites_up": up,
                "scrape": ours.as_dict(),
                "floor": floors.as_dict(),
                "ratio_median": ours.median / floors.median,
                "ratio_p95": ours.p95 / floors.p95,
                "rss_mib": rss,
                "rss_peak_mib": peak,
                "pss_mib": sum(map(proportional_mib, pids)),
                "connections": max(v for k, v in most[name].items() if k != "_polls"),
                "processes": len(pids),
                "cpu_s": cpu[name].per_call() if cpu else {},
                "replayed": replayed.as_dict() if replayed else None,
            }
    return measured


def _alternated(
    exporters: Mapping[str, Callable[[], object]],
    floor: Callable[[], object],
    rounds: int,
    cpu: Mapping[str, CpuAccount] | None = None,
) -> dict[str, tuple[Timings, Timings]]:
    """Each round, for each exporter in turn (in the other order every other round): the
    floor, then a scrape; whatever slows the machine slows all of them. Each exporter's
    scrapes and the floor's passes before them. With `cpu` (an account per exporter's
    process), the CPU time each side used is counted too."""
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in exporters}
    order = list(exporters.items())
    for _ in range(rounds):
        order.reverse()  # none always right after another's scrape
        for name, scrape in order:
            ours, floors = times[name]
            account = cpu[name] if cpu else None
            for call, samples, side in ((floor, floors, "floor"), (scrape, ours, "scrape")):
                before = account.read() if account else None
                started = time.perf_counter()
                call()
                samples.append(time.perf_counter() - started)
                if account and before:
                    account.add(side, before)
    return {
        name: (Timings(tuple(ours)), Timings(tuple(floors)))
        for name, (ours, floors) in times.items()
    }


class CpuAccount:
    """The CPU time of a scrape and of the floor, on each side: the database server's, and
    the client's (the exporter's process; for the floor, this benchmark's own process,
    whose threads send the floor's statements). On two cores, a scrape can take no less
    wall time than half its CPU time: this says where that CPU time goes."""

    def __init__(self, server_pid: int, exporter_pids: list[int]) -> None:
        self._server = server_pid
        self._exporters = exporter_pids
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def read(self) -> tuple[float, float, float]:
        return (
            process_cpu_seconds(self._server),
            sum(map(process_cpu_seconds, self._exporters)),
            time.process_time(),
        )

    def add(self, side: str, before: tuple[float, float, float]) -> None:
        server, exporter, own = (
            after - then for after, then in zip(self.read(), before, strict=True)
        )
        client = own if side == "floor" else exporter
        for part, seconds in (("server", server), ("client", client)):
            key = f"{side}_{part}_s"
            self.sums[key] = self.sums.get(key, 0.0) + seconds
        self.counts[side] = self.counts.get(side, 0) + 1

    def per_call(self) -> dict[str, float]:
        return {key: total / self.counts[key.split("_")[0]] for key, total in self.sums.items()}


def _database_seconds(exposition: str) -> dict[str, float]:
    values = metric_values(exposition, "actionscheduler_exporter_database_seconds_total")
    tiers: dict[str, float] = {}
    for labels, value in values.items():
        for tier in ("hot", "in_round", "heavy"):
            if f'tier="{tier}"' in labels:
                tiers[tier] = tiers.get(tier, 0.0) + value
    return tiers


def _wait_heavy(running: Running, timeout: float = 900) -> None:
    """Until the heavy tier's first refresh is done: no timed scrape overlaps it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reads = heavy_reads(running.scrape())
        if sum('collector="status"' in labels for labels in reads):
            return
        time.sleep(1)
    raise RuntimeError(f"the heavy tier was not refreshed within {timeout:.0f} s")


def summary_line(measured: dict[str, Any]) -> str:
    first = measured.get("first_scrape_s")
    return (
        f"{measured['ratio_median']:.2f}x the floor (p95 {measured['ratio_p95']:.2f}x),"
        f" {ms(measured['scrape']['median_s'])} against {ms(measured['floor']['median_s'])}"
        + (f", first scrape {first:.2f} s" if first is not None else "")
    )
