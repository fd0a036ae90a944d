"""Where a thousand stores' scrape spends the exporter's CPU, phase by phase, in one
process: joining the rounds, the rounds, the results' assembly, and the writing with its
gzip coding, each as `/metrics` runs them (without HTTP), on the benchmark's server.

    python -m bench.phases                         # 1,000 databases, 40 timed scrapes
    python -m bench.phases --setup subsites --warm 400
    python -m bench.phases --profile               # and cProfile of the assembly and writing
    python -m bench.phases --parts                 # and the rounds' CPU part by part
    python -m bench.phases --calls                 # Python calls per store, by phase
    python -m bench.phases --calls --functions 40  # and the 40 functions called most
    python -m bench.phases --cores                 # and the rounds' use of the cores
    python -m bench.phases --pace 15 --scrapes 30  # at Prometheus' pace, statements counted

The garbage collector is set as `serve` sets it: with the interpreter's thresholds a
thousand stores' scrape spent a third of its CPU in the collector's walks, and a profile
blamed whatever allocated when it ran (docs/performance-sessions.md, "Session of
2026-12-05, from 16:08 UTC"). The rounds' CPU is what the process spent beyond the
scrape's own thread: their threads' (and the heavy tier's, idle after its first refresh).

At `--pace`, one timed scrape starts every so many seconds, as Prometheus scrapes, and
the statements each sends are counted (the benchmark's server is its own: its
`Com_select`, less the counting's). Cached readings (the anomalies, the due split, the
tables' statistics) come due between two scrapes then: at the default pace, about one
scrape a second, few do.

Run it alone: its CPU times are the machine's as much as the code's. It starts the
benchmark's server (.bench/, or `AS_BENCH_MARIADB`) and prepares the thousand stores
once, as `bench.run` does: not while `bench.run` uses the same data directory.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from actionscheduler_exporter.config import load_file
from actionscheduler_exporter.exposition.render import render_parts
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.budget import ScrapeBudget
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.scrape.garbage import tune_garbage_collection
from actionscheduler_exporter.web.kept_gzip import KeptGzip
from bench.call_counts import CallCounts
from bench.core_use import CoreUse
from bench.floor_cases import databases_document, network_document, thousand_stores_site
from bench.many_sites import prepare, selects
from bench.measure import ms
from bench.round_parts import RoundParts
from bench.server import ROOT, bench_server
from testbed.accept_headers import PROMETHEUS_ACCEPT

PHASES = ("joining the rounds", "the rounds", "the results' assembly", "writing and gzip")
# Prometheus' default scrape timeout: the rounds' deadline.
TIMEOUT = 10.0


class PhaseTimer:
    """One scrape as the telemetry path runs it, its CPU counted phase by phase: the
    scrape's own thread's for its phases, the process's beyond them for the rounds."""

    def __init__(
        self,
        coordinator: Coordinator,
        profile: cProfile.Profile | None,
        calls: CallCounts | None = None,
        cores: CoreUse | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._cores = cores
        self._gzip = KeptGzip()
        self._profile = profile
        self._calls = calls
        self.cpu: dict[str, list[float]] = {phase: [] for phase in PHASES}
        self.wall: list[float] = []

    def scrape(self, timed: bool = True) -> list[SiteResult]:
        self._count(PHASES[0], timed)
        cores = self._cores if timed else None
        if cores is not None:
            cores.start()
        process, thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
        pending = self._coordinator.begin(ScrapeBudget(TIMEOUT))
        joined = time.thread_time()
        self._count(PHASES[1], timed)
        pending.wait()
        if cores is not None:
            # In the scrape's own thread between its phases: its CPU counts in none.
            cores.stop()
        waited = time.thread_time()
        if self._profile is not None and timed:
            self._profile.enable()
        self._count(PHASES[2], timed)
        results = pending.results()
        assembled = time.thread_time()
        self._count(PHASES[3], timed)
        parts, content_type = render_parts(results, PROMETHEUS_ACCEPT)
        written = sum(len(piece) for piece in self._gzip.gzipped(parts, content_type))
        self._count("", False)
        if self._profile is not None and timed:
            self._profile.disable()
        done = time.thread_time()
        if timed and written:
            own = [joined - thread, assembled - waited, done - assembled]
            rounds = time.process_time() - process - (done - thread)
            for phase, seconds in zip(PHASES, [own[0], rounds, own[1], own[2]], strict=True):
                self.cpu[phase].append(seconds)
            self.wall.append(time.perf_counter() - wall)
        return results

    def _count(self, phase: str, timed: bool) -> None:
        """The scrape thread's calls from now on count under `phase` (with `--calls`)."""
        if self._calls is not None:
            self._calls.phase, self._calls.counting = phase, timed

    def table(self) -> list[str]:
        lines = ["| phase | CPU median |", "| --- | --- |"]
        lines += [f"| {phase} | {ms(statistics.median(self.cpu[phase]))} |" for phase in PHASES]
        total = [sum(each) for each in zip(*self.cpu.values(), strict=True)]
        lines.append(f"| in all | {ms(statistics.median(total))} |")
        lines.append(f"| (the scrape's wall time) | {ms(statistics.median(self.wall))} |")
        return lines


def heavy_refreshed(results: list[SiteResult]) -> bool:
    """Whether every site has its heavy tier's first values (their read time is reported)."""
    return all(
        any(
            item.metric is catalog.COLLECTOR_LAST_SUCCESS and ("collector", "status") in item.labels
            for item in result.samples
        )
        for result in results
    )


def until_heavy_refreshed(scrape: Callable[[], list[SiteResult]]) -> None:
    """Scrapes about once a second until every site has its heavy tier's first values,
    as a long-running exporter's have (900 s at most)."""
    started = time.monotonic()
    while not heavy_refreshed(scrape()):
        if time.monotonic() - started > 900:
            raise SystemExit("the heavy tier was not refreshed within 900 s")
        time.sleep(1.0)


def collections_during(call: Callable[[], None]) -> int:
    """How many times the garbage collector ran (any generation) during `call`."""
    counted = 0

    def count(phase: str, _: dict[str, Any]) -> None:
        nonlocal counted
        counted += phase == "start"

    gc.callbacks.append(count)
    try:
        call()
    finally:
        gc.callbacks.remove(count)
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", choices=("databases", "subsites"), default="databases")
    parser.add_argument("--scrapes", type=int, default=40, help="timed scrapes")
    parser.add_argument(
        "--warm", type=float, default=60.0, help="seconds of scrapes, about one a second, first"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the assembly and writing")
    parser.add_argument(
        "--parts", action="store_true", help="and the rounds' CPU part by part (bench.round_parts)"
    )
    parser.add_argument(
        "--calls",
        action="store_true",
        help="Python calls per store by phase (bench.call_counts; its CPU times mean nothing)",
    )
    parser.add_argument(
        "--functions",
        type=int,
        default=0,
        metavar="N",
        help="with --calls: each phase's N functions called most, per store",
    )
    parser.add_argument(
        "--cores",
        action="store_true",
        help="and the rounds' use of the cores: each side's threads on and waiting for one",
    )
    parser.add_argument(
        "--pace",
        type=float,
        default=0.0,
        help="seconds from one timed scrape's start to the next's, statements counted",
    )
    arguments = parser.parse_args()
    if arguments.calls and (arguments.parts or arguments.profile):
        # cProfile's own hook would also replace the counting one.
        parser.error("--calls counts alone: not with --parts or --profile")
    if arguments.functions and not arguments.calls:
        parser.error("--functions lists what --calls counts: give both")
    if arguments.functions < 0:
        parser.error("--functions takes how many functions to list (0 or more)")
    if arguments.parts and arguments.setup == "subsites":
        parser.error(
            "--parts times the rounds of site entries: a network's subsites are read elsewhere"
        )
    with bench_server() as server:
        prepare([server], spread=False)
        site = thousand_stores_site(server)
        document = (network_document if arguments.setup == "subsites" else databases_document)(site)
        path = ROOT / ".bench" / "work" / "phases.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        assert server.process is not None, "the benchmark starts its own server"
        _measure(path, arguments, server.process.pid, lambda: selects([server]))


def _measure(
    path: Path, arguments: argparse.Namespace, server_pid: int, statements: Callable[[], int]
) -> None:
    tune_garbage_collection()
    parts = RoundParts()
    calls = CallCounts(by_function=arguments.functions > 0) if arguments.calls else None
    with (
        parts if arguments.parts else contextlib.nullcontext(parts),
        calls if calls is not None else contextlib.nullcontext(),
    ):
        coordinator = Coordinator(load_file(str(path)))
        profile = cProfile.Profile() if arguments.profile else None
        cores = CoreUse(server_pid, time.perf_counter) if arguments.cores else None
        timer = PhaseTimer(coordinator, profile, calls, cores)
        try:
            until_heavy_refreshed(lambda: timer.scrape(timed=False))
            started = time.monotonic()
            while time.monotonic() - started < arguments.warm:
                timer.scrape(timed=False)
                time.sleep(1.0)

            def timed() -> None:
                for _ in range(arguments.scrapes):
                    started, before = time.monotonic(), statements()
                    timer.scrape()
                    if arguments.pace:
                        sent.append(statements() - before)
                        time.sleep(max(0.0, arguments.pace - (time.monotonic() - started)))
                    else:
                        time.sleep(0.3)

            sent: list[int] = []
            parts.reset()
            collected = collections_during(timed)
            parts.scrapes = arguments.scrapes
            stores = len(timer.scrape(timed=False))  # site labels: a network's subsites
        finally:
            coordinator.close()
    print(f"1,000 {arguments.setup}, {arguments.scrapes} scrapes after {arguments.warm:.0f} s:")
    print("\n".join(timer.table()))
    print(f"garbage collections while timed: {collected}")
    if sent:
        print(
            f"one scrape every {arguments.pace:g} s: statements per scrape, median "
            f"{statistics.median(sent):g} (from {min(sent)} to {max(sent)}): {sent}"
        )
        print(f"each scrape's wall, ms: {[round(1000 * wall) for wall in timer.wall]}")
        rounds = timer.cpu[PHASES[1]]
        print(f"each scrape's rounds' CPU, ms: {[round(1000 * cpu) for cpu in rounds]}")
    if arguments.parts:
        print("\n".join(parts.table()))
    if calls is not None:
        print("\n".join(calls.table(PHASES, stores, arguments.scrapes)))
        for phase in PHASES if arguments.functions else ():
            found = calls.function_table(phase, stores, arguments.scrapes, arguments.functions)
            print("\n" + "\n".join(found))
    if cores is not None:
        print("\n".join(cores.table()))
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
