"""How the rounds of a scrape use the machine's cores: what the exporter's threads and
the database server's threads each spent on a core and waiting for one (runnable, on a
run queue), their context switches, and the share of the machine left idle, from
`/proc` (each thread's `schedstat` and `status`, and `/proc/stat`) read when the rounds
start and when they end: two readings per scrape, nothing sampled in between, so the
measure takes no core from what it measures.

`bench.phases --cores` prints it (docs/performance.md, "The benchmark", item 12). A
thread that ends between the two readings is not counted: the lanes' threads and the
server's connection threads last.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.measure import ms


@dataclass(frozen=True)
class Scheduled:
    """What a process's threads have had of the cores so far."""

    running: float  # seconds on a core
    waiting: float  # seconds runnable, waiting for a core
    switches: int  # context switches, voluntary or not

    def __sub__(self, before: Scheduled) -> Scheduled:
        return Scheduled(
            self.running - before.running,
            self.waiting - before.waiting,
            self.switches - before.switches,
        )


def scheduled(pid: int) -> Scheduled:
    """The process's threads' time on a core and on a run queue, and their switches."""
    running = waiting = 0
    switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_core, queued, _ = (task / "schedstat").read_text(encoding="ascii").split()
            status = (task / "status").read_text(encoding="ascii")
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        running += int(on_core)
        waiting += int(queued)
        switches += sum(
            int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line
        )
    return Scheduled(running / 1e9, waiting / 1e9, switches)


def machine_ticks() -> tuple[int, int]:
    """The machine's idle ticks (idle and waiting for I/O) and all its ticks so far."""
    with open("/proc/stat", encoding="ascii") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    return ticks[3] + ticks[4], sum(ticks)


@dataclass(frozen=True)
class _Reading:
    exporter: Scheduled
    server: Scheduled
    ticks: tuple[int, int]


class CoreUse:
    """The cores' use during each timed scrape's rounds: `start` as they start, `stop`
    as the last ends."""

    def __init__(self, server_pid: int, clock: Callable[[], float]) -> None:
        self._server = server_pid
        self._clock = clock
        self._started: tuple[float, _Reading] | None = None
        self.walls: list[float] = []
        self.exporter: list[Scheduled] = []
        self.server: list[Scheduled] = []
        self.idle: list[float] = []

    def _read(self) -> _Reading:
        return _Reading(scheduled(os.getpid()), scheduled(self._server), machine_ticks())

    def start(self) -> None:
        self._started = (self._clock(), self._read())

    def stop(self) -> None:
        assert self._started is not None, "stop without start"
        started_at, before = self._started
        after = self._read()
        self.walls.append(self._clock() - started_at)
        self.exporter.append(after.exporter - before.exporter)
        self.server.append(after.server - before.server)
        idle, total = (now - then for now, then in zip(after.ticks, before.ticks, strict=True))
        self.idle.append(idle / total if total else 0.0)
        self._started = None

    def table(self) -> list[str]:
        """Medians per scrape; cores: seconds on (or waiting for) a core over the rounds'
        wall."""
        wall = statistics.median(self.walls)

        def row(name: str, side: list[Scheduled]) -> str:
            running = statistics.median(each.running for each in side)
            waiting = statistics.median(each.waiting for each in side)
            switches = statistics.median(each.switches for each in side)
            return (
                f"| {name} | {ms(running)} ({running / wall:.2f} of a core) | {ms(waiting)}"
                f" ({waiting / wall:.2f}) | {switches:.0f} |"
            )

        return [
            f"The rounds' use of the cores (their wall {ms(wall)}, median of {len(self.walls)};"
            f" the machine idle {100 * statistics.median(self.idle):.1f} % of the time):",
            "| threads of | on a core | waiting for one | context switches |",
            "| --- | --- | --- | --- |",
            row("the exporter", self.exporter),
            row("the database server", self.server),
        ]
