"""This checkout's and the baseline's statements of one steady scrape each, sent again in
turn: what the statements' shape costs the database server, without either exporter's
pace or CPU (`bench.replay` does the same for one exporter against the floor).

    AS_BENCH_BASELINE=<checkout> python -m bench.replay_pair               # 1,000 databases
    AS_BENCH_BASELINE=<checkout> python -m bench.replay_pair --setup subsites --rounds 20

Both exporters run at once, each as its own database user, scraped in turn about once a
second for `--warm` seconds (past their first scrapes, before the tables' statistics of
their stores come due: about every five minutes, which sends those stores' statements
alone); then one scrape of each is captured from the server's general log, and the two
captures are sent again on as many connections, each first in every other round. The
server's CPU of a replay is counted from /proc, so the machine's noise falls on both
alike; the ratio is this checkout's over the baseline's. It starts the benchmark's
server (.bench/, or `AS_BENCH_MARIADB`) and prepares the thousand stores once, as
`bench.run` does: not while `bench.run` uses the same data directory.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path

from bench.exporters import BASELINE, exporter_for
from bench.floor_cases import databases_document, network_document, thousand_stores_site
from bench.many_sites import BASELINE_USER, USER, prepare
from bench.measure import ms, process_cpu_seconds
from bench.replay import Command, captured, connections_for, send_all
from bench.server import ROOT, bench_server
from testbed.mariadb import Server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", choices=("databases", "subsites"), default="databases")
    parser.add_argument("--warm", type=float, default=30.0, help="seconds of scrapes first")
    parser.add_argument("--rounds", type=int, default=15, help="timed replays of each")
    arguments = parser.parse_args()
    if not BASELINE:
        parser.error("AS_BENCH_BASELINE=<checkout>: the exporter to compare with")
    workdir = ROOT / ".bench" / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    with bench_server() as server, contextlib.ExitStack() as stack:
        assert server.process is not None, "the server's CPU is counted: a private server"
        prepare([server], spread=False)
        site = thousand_stores_site(server)
        setup = network_document if arguments.setup == "subsites" else databases_document
        sides = {"exporter": (USER, None), "baseline": (BASELINE_USER, Path(BASELINE))}
        running = {
            name: stack.enter_context(
                exporter_for(
                    {"sites": [{**s, "user": user} for s in setup(site)["sites"]]},
                    workdir,
                    name=name,
                    source=source,
                )
            )
            for name, (user, source) in sides.items()
        }
        started = time.monotonic()
        while time.monotonic() - started < arguments.warm:
            for exporter in running.values():
                exporter.scrape()
                time.sleep(1.0)
        captures = {
            name: captured(server, running[name].scrape, user) for name, (user, _) in sides.items()
        }
        database = site["database"] if arguments.setup == "subsites" else None
        cpu, wall = _in_turn(server.process.pid, server, captures, database, arguments.rounds)
    print(f"1,000 {arguments.setup}, one scrape of each after {arguments.warm:.0f} s, "
          f"{arguments.rounds} replays of each in turn:")  # fmt: skip
    print("| exporter | statements | connections | wall median | server CPU mean |")
    print("| --- | --- | --- | --- | --- |")
    for name, commands in captures.items():
        statements = sum(1 for sent in commands for command, _ in sent if command == "Query")
        print(
            f"| {name} | {statements} | {len(commands)} | {ms(statistics.median(wall[name]))}"
            f" | {ms(statistics.fmean(cpu[name]))} |"
        )
    ratio = statistics.fmean(cpu["exporter"]) / statistics.fmean(cpu["baseline"])
    print(f"server CPU, this checkout's over the baseline's: {ratio:.2f}x")


def _in_turn(
    pid: int,
    server: Server,
    captures: dict[str, list[list[Command]]],
    database: str | None,
    rounds: int,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each capture sent again `rounds` times, the two in turn (each first every other
    round), after one untimed pass each; the server's CPU and the wall of each."""
    cpu: dict[str, list[float]] = {name: [] for name in captures}
    wall: dict[str, list[float]] = {name: [] for name in captures}
    with contextlib.ExitStack() as stack:
        connections = {
            name: stack.enter_context(connections_for(server, len(commands), database))
            for name, commands in captures.items()
        }
        for name, commands in captures.items():
            send_all(connections[name], commands)
        order = list(captures)
        for index in range(rounds):
            for name in order if index % 2 == 0 else reversed(order):
                before = process_cpu_seconds(pid)
                began = time.perf_counter()
                send_all(connections[name], captures[name])
                wall[name].append(time.perf_counter() - began)
                cpu[name].append(process_cpu_seconds(pid) - before)
    return cpu, wall


if __name__ == "__main__":
    main()
