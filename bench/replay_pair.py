"""This checkout's and the baseline's statements of one steady scrape each, sent again in
turn: what the statements' shape costs the database server, without either exporter's
pace or CPU (`bench.replay` does the same for one exporter against the floor).

    AS_BENCH_BASELINE=<checkout> python -m bench.replay_pair               # 1,000 databases
    AS_BENCH_BASELINE=<checkout> python -m bench.replay_pair --setup subsites --rounds 20

Both exporters run at once, each as its own database user, scraped in turn about once a
second for `--warm` seconds (past their first scrapes, before the tables' statistics of
their stores come due: about every five minutes, which sends those stores' statements
alone); then one scrape of each is captured from the server's general log, and the two
captures are sent again on as many connections, in turn (`bench.replay.in_turn`). The
server's CPU of a replay is counted from /proc, so the machine's noise falls on both
alike; the ratio is this checkout's over the baseline's. It starts the benchmark's
server (.bench/, or `AS_BENCH_MARIADB`) and prepares the thousand stores once, as
`bench.run` does: not while `bench.run` uses the same data directory.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
from pathlib import Path

from bench.exporters import BASELINE, exporter_for
from bench.floor_cases import databases_document, network_document, thousand_stores_site
from bench.many_sites import BASELINE_USER, USER, prepare
from bench.measure import ms
from bench.replay import captured, connections_for, in_turn, send_all, statements_of
from bench.server import ROOT, bench_server


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
        # A network's statements name no database: its connections open the network's.
        database = setup(site)["sites"][0]["database"] if arguments.setup == "subsites" else None
        connections = {
            name: stack.enter_context(connections_for(server, len(commands), database))
            for name, commands in captures.items()
        }
        wall, cpu = in_turn(
            server.process.pid,
            {
                name: functools.partial(send_all, connections[name], commands)
                for name, commands in captures.items()
            },
            arguments.rounds,
        )
    print(f"1,000 {arguments.setup}, one scrape of each after {arguments.warm:.0f} s, "
          f"{arguments.rounds} replays of each in turn:")  # fmt: skip
    print("| exporter | statements | connections | wall median | server CPU mean |")
    print("| --- | --- | --- | --- | --- |")
    for name, commands in captures.items():
        print(
            f"| {name} | {statements_of(commands)} | {len(commands)}"
            f" | {ms(statistics.median(wall[name]))} | {ms(statistics.fmean(cpu[name]))} |"
        )
    ratio = statistics.fmean(cpu["exporter"]) / statistics.fmean(cpu["baseline"])
    print(f"server CPU, this checkout's over the baseline's: {ratio:.2f}x")


if __name__ == "__main__":
    main()
