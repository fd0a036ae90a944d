"""Many sites in one exporter, side by side with one site in the same run: a multisite
network of 1,000 subsites in one database (`table_prefix: auto`), 1,000 databases on one
server (a site entry each), and 1,000 databases on two servers found by `database: auto`.
Each store is small (a copy of one generated store of 300 actions), as in an agency's
fleet.

Per set-up: the first scrape after start (its duration, and how many sites it reported up
within Prometheus' default 10 s timeout), steady scrapes (median, p95), the exporter's
memory, the most connections it held on each server (counted by the server, for the
exporter's own user), the statements it sent per site and steady scrape (the servers are
the benchmark's own: their Com_select, less the watcher's), and how long the heavy tier
took to refresh every site once.

With `AS_BENCH_BASELINE=<another checkout>`, each set-up is measured again right after
with that checkout's exporter: before and after, side by side in one run.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql

from bench.exporters import BASELINE, Running, Shards, exporter_for, sharded_exporters
from bench.measure import heavy_reads, metric_values, resident_mib
from bench.server import ROOT, TABLE_CACHES, size_table_cache
from testbed.generate import PREFIX, generate, is_generated
from testbed.mariadb import Server, start_private
from testbed.metrics_proto import decode
from testbed.store_profile import StoreProfile

SITES = 1000
TEMPLATE = StoreProfile(300, due=10)
NETWORK = "many_network"
DATABASE_PATTERN = "many\\_db\\_%"
USER, PASSWORD = "as_bench", "as-bench"
# The baseline's own user, when two exporters run at once: each one's connections counted.
BASELINE_USER = "as_bench_baseline"
STEADY_SCRAPES = 20
_TABLES = ("actions", "claims", "groups", "logs")


@contextlib.contextmanager
def second_server() -> Iterator[Server]:
    """Another database server, so that 1,000 databases are spread over two."""
    server = start_private(
        ROOT / ".bench" / "mariadb-2",
        extra_arguments=["--innodb-buffer-pool-size=512M", *TABLE_CACHES],
    )
    try:
        size_table_cache(server, 1_000)
        yield server
    finally:
        server.stop()


def prepare(servers: list[Server], spread: bool = True) -> None:
    """The template store, the network's subsites and the databases (once: kept in .bench);
    without `spread`, only what the first server holds alone (the floor's set-ups)."""
    for server in servers:
        with server.connect(local_infile=True) as connection:
            if not is_generated(connection, TEMPLATE):
                generate(connection, TEMPLATE)
            _grant_reader(connection)
    with servers[0].connect() as connection:
        _copies(connection, [(NETWORK, f"wp_{index}_") for index in range(2, SITES + 2)])
    for position, server in enumerate(servers if spread else []):
        names = [f"many_db_{index}" for index in range(position, SITES, len(servers))]
        with server.connect() as connection:
            _copies(connection, [(name, PREFIX) for name in names])
    # Every database on the first server too, for the one-server set-up.
    with servers[0].connect() as connection:
        _copies(connection, [(f"one_db_{index}", PREFIX) for index in range(SITES)])


def many_sites_case(servers: list[Server], workdir: Path) -> dict[str, Any]:
    first = servers[0]
    site = {"host": first.host, "port": first.port, "user": USER, "password": PASSWORD}
    setups = {
        "one site": ({"sites": [{**site, "name": "one", "database": "many_db_0"}]}, 1),
        f"{SITES} subsites in one database": (
            {"sites": [{**site, "name": "net", "database": NETWORK, "table_prefix": "auto"}]},
            SITES,
        ),
        f"{SITES} databases on one server, an entry each": (
            {
                "sites": [
                    {**site, "name": f"db{index}", "database": f"one_db_{index}"}
                    for index in range(SITES)
                ]
            },
            SITES,
        ),
        f"{SITES} databases on {len(servers)} servers": (
            {
                "sites": [
                    {
                        "name": f"server{index}",
                        "host": server.host,
                        "port": server.port,
                        "user": USER,
                        "password": PASSWORD,
                        "database": "auto",
                        "database_pattern": DATABASE_PATTERN,
                    }
                    for index, server in enumerate(servers)
                ]
            },
            SITES,
        ),
    }
    measured: dict[str, dict[str, Any]] = {}
    for name, (document, expected) in setups.items():
        measured[name] = _measure(document, expected, servers, workdir)
        if BASELINE:
            baseline = Path(BASELINE)
            measured[f"{name} (baseline)"] = _measure(
                document, expected, servers, workdir, source=baseline
            )
    network = setups[f"{SITES} subsites in one database"][0]
    measured[f"{SITES} subsites, 2 shards (each)"] = _measure_shards(network, 2, servers, workdir)
    return measured


def _measure_shards(
    document: dict[str, Any], shards: int, servers: list[Server], workdir: Path
) -> dict[str, Any]:
    """Each shard as its own process, scraped in turn: the figures of the slowest."""
    with contextlib.ExitStack() as stack:
        most = stack.enter_context(connections_watched(servers))
        exporters = stack.enter_context(sharded_exporters(document, workdir, shards)).shards
        firsts: list[tuple[float, int]] = []
        timings: list[float] = []
        for exporter in exporters:
            started = time.perf_counter()
            first = exporter.scrape()
            firsts.append((time.perf_counter() - started, sites_up(first)))
        for _ in range(STEADY_SCRAPES):
            for exporter in exporters:
                started = time.perf_counter()
                exporter.scrape()
                timings.append(time.perf_counter() - started)
        up = sum(sites_up(exporter.scrape()) for exporter in exporters)
        rss = max(resident_mib(exporter.process.pid)[0] for exporter in exporters)
    timings.sort()
    return {
        "sites": up,
        "first_scrape_s": max(duration for duration, _ in firsts),
        "first_scrapesites_up": sum(count for _, count in firsts),
        "steady_median_s": statistics.median(timings),
        "steady_p95_s": timings[int(0.95 * (len(timings) - 1))],
        "sites_up": up,
        "rss_mib": rss,
        "rss_peak_mib": rss,
        "connections_per_server": {k: v for k, v in most.items() if k != "_polls"},
        "heavy_all_refreshed_s": None,
        "shards": shards,
    }


def _measure(
    document: dict[str, Any],
    expected: int,
    servers: list[Server],
    workdir: Path,
    source: Path | None = None,
) -> dict[str, Any]:
    with (
        connections_watched(servers) as most,
        exporter_for(document, workdir, source=source) as exporter,
    ):
        started = time.perf_counter()
        first = exporter.scrape()
        first_s = time.perf_counter() - started
        first_up = sites_up(first)
        exporter.scrape()  # settled: every site read once before the counting
        timings = []
        heavy_done_s = None
        selects_before, polls_before = selects(servers), most["_polls"]
        for _ in range(STEADY_SCRAPES):
            started = time.perf_counter()
            exposition = exporter.scrape()
            timings.append(time.perf_counter() - started)
            if heavy_done_s is None and _heavy_refreshed(exposition) >= expected:
                heavy_done_s = time.perf_counter() - started
        sent = selects(servers) - selects_before - (most["_polls"] - polls_before)
        heavy_done_s = heavy_done_s or wait_heavy(exporter, expected)
        rss, peak = resident_mib(exporter.process.pid)
        up = sites_up(exposition)
    timings.sort()
    return {
        "sites": expected,
        "first_scrape_s": first_s,
        "first_scrapesites_up": first_up,
        "steady_median_s": statistics.median(timings),
        "steady_p95_s": timings[int(0.95 * (len(timings) - 1))],
        "sites_up": up,
        "rss_mib": rss,
        "rss_peak_mib": peak,
        "connections_per_server": {k: v for k, v in most.items() if k != "_polls"},
        "statements_per_site": sent / STEADY_SCRAPES / expected,
        "heavy_all_refreshed_s": heavy_done_s,
    }


def selects(servers: list[Server]) -> int:
    """SELECT statements the servers ran so far, less this reading's own."""
    total = 0
    for server in servers:
        with server.connect() as connection, connection.cursor() as cursor:
            cursor.execute("SHOW GLOBAL STATUS LIKE 'Com_select'")
            total += int(cursor.fetchone()[1])
    return total - len(servers)


def sites_up(exposition: object) -> int:
    """The sites up in a text exposition (str) or a protobuf one (bytes: read with
    Prometheus' own data model)."""
    if isinstance(exposition, str):
        return sum(1 for value in metric_values(exposition, "actionscheduler_up").values() if value)
    if not isinstance(exposition, bytes):
        raise TypeError(f"an exposition is text or protobuf, not {type(exposition).__name__}")
    return sum(
        1
        for family in decode(exposition)
        if family.name == "actionscheduler_up"
        for metric in family.metric
        if metric.gauge.value
    )


def _heavy_refreshed(exposition: str) -> int:
    reads = heavy_reads(exposition)
    return sum(1 for labels in reads if 'collector="status"' in labels)


def wait_heavy(exporter: Running | Shards, expected: int, timeout: float = 600) -> float | None:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if _heavy_refreshed(exporter.scrape()) >= expected:
            return time.perf_counter() - started
        time.sleep(1)
    return None


@contextlib.contextmanager
def connections_watched(servers: list[Server], user: str = USER) -> Iterator[dict[str, int]]:
    """The most connections of the exporter's `user` seen on each server, polled."""
    most = {f"{server.host}:{server.port}": 0 for server in servers}
    most["_polls"] = 0  # the watcher's own statements, left out of the exporter's count
    stop = threading.Event()

    def watch() -> None:
        connections = [server.connect() for server in servers]
        try:
            while not stop.is_set():
                for server, connection in zip(servers, connections, strict=True):
                    with connection.cursor() as cursor:
                        cursor.execute(
                            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s",
                            (user,),
                        )
                        key = f"{server.host}:{server.port}"
                        most[key] = max(most[key], int(cursor.fetchone()[0]))
                        most["_polls"] += 1
                stop.wait(0.05)
        finally:
            for connection in connections:
                connection.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield most
    finally:
        stop.set()
        watcher.join()


def _grant_reader(connection: pymysql.connections.Connection[Any]) -> None:
    with connection.cursor() as cursor:
        for user in (USER, BASELINE_USER):
            cursor.execute(f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{PASSWORD}'")
            cursor.execute(f"GRANT SELECT ON *.* TO '{user}'@'%'")


def _copies(
    connection: pymysql.connections.Connection[Any], targets: list[tuple[str, str]]
) -> None:
    """Copies of the template store's four tables, as (database, prefix); skips done ones."""
    template = TEMPLATE.name
    with connection.cursor() as cursor:
        for database in sorted({database for database, _ in targets}):
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        cursor.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES"
            " WHERE TABLE_NAME LIKE '%%actionscheduler\\_logs'"
        )
        done = {(str(schema), str(name)) for schema, name in cursor.fetchall()}
        for database, prefix in targets:
            if (database, f"{prefix}actionscheduler_logs") in done:
                continue
            for table in _TABLES:  # logs last: its presence marks a finished copy
                target = f"`{database}`.{prefix}actionscheduler_{table}"
                source = f"`{template}`.{PREFIX}actionscheduler_{table}"
                cursor.execute(f"DROP TABLE IF EXISTS {target}")
                cursor.execute(f"CREATE TABLE {target} LIKE {source}")
                cursor.execute(f"INSERT INTO {target} SELECT * FROM {source}")
