"""How the rounds of a scrape use the machine's cores: what the exporter's threads and
the database server's threads each spent on a core and waiting for one (runnable, on a
run queue), their context switches, and the share of the machine left idle, from
`/proc` (each thread's `schedstat` and `status`, and `/proc/stat`) read when the rounds
start and when they end: two readings per scrape of about a millisecond each, nothing
sampled in between. `/proc/stat` is the whole machine's: other work on it shows in the
idle share.

`bench.phases --cores` prints it (docs/performance.md, "The benchmark", item 12). Each
thread counts what it spent between the two readings (a thread started meanwhile, all
it spent; one that ended meanwhile, nothing): the lanes' threads and the server's
connection threads last.
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
    """What a thread has had of the cores (or threads, added up)."""

    running: float  # seconds on a core
    waiting: float  # seconds runnable, waiting for a core
    switches: int  # context switches, voluntary or not

    def __sub__(self, before: Scheduled) -> Scheduled:
        return Scheduled(
            self.running - before.running,
            self.waiting - before.waiting,
            self.switches - before.switches,
        )


def scheduled(pid: int) -> dict[str, Scheduled]:
    """Each of the process's threads' time on a core and on a run queue, and its context
    switches, by thread id."""
    threads: dict[str, Scheduled] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_core, queued, _ = (task / "schedstat").read_text(encoding="ascii").split()
            status = (task / "status").read_text(encoding="ascii")
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        switches = sum(
            int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line
        )
        threads[task.name] = Scheduled(int(on_core) / 1e9, int(queued) / 1e9, switches)
    return threads


def spent_between(before: dict[str, Scheduled], after: dict[str, Scheduled]) -> Scheduled:
    """What the threads spent between two readings, added up."""
    none = Scheduled(0.0, 0.0, 0)
    running = waiting = 0.0
    switches = 0
    for thread, now in after.items():
        spent = now - before.get(thread, none)
        running += spent.running
        waiting += spent.waiting
        switches += spent.switches
    return Scheduled(running, waiting, switches)


def machine_ticks() -> tuple[int, int]:
    """The machine's idle ticks (idle and waiting for I/O) and all its ticks so far."""
    with open("/proc/stat", encoding="ascii") as stat:
        # user, nice, system, idle, iowait, irq, softirq, steal (guest time is in user's)
        ticks = [int(field) for field in stat.readline().split()[1:9]]
    return ticks[3] + ticks[4], sum(ticks)


@dataclass(frozen=True)
class _Reading:
    exporter: dict[str, Scheduled]
    server: dict[str, Scheduled]
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
        self.exporter.append(spent_between(before.exporter, after.exporter))
        self.server.append(spent_between(before.server, after.server))
        idle, total = (now - then for now, then in zip(after.ticks, before.ticks, strict=True))
        self.idle.append(idle / total if total else 0.0)
        self._started = None

    def table(self) -> list[str]:
        """Medians per scrape: seconds on a core (and that over the rounds' wall: the
        cores used), seconds waiting for one (and that over the wall: the threads waiting
        on average)."""
        wall = statistics.median(self.walls)

        def row(name: str, side: list[Scheduled]) -> str:
            running = statistics.median(each.running for each in side)
            waiting = statistics.median(each.waiting for each in side)
            switches = statistics.median(each.switches for each in side)
            return (
                f"| {name} | {ms(running)} ({running / wall:.2f} of a core) | {ms(waiting)}"
                f" ({waiting / wall:.2f} threads on average) | {switches:.0f} |"
            )

        return [
            f"The rounds' use of the cores (their wall with their joining {ms(wall)}, median of"
            f" {len(self.walls)}; the machine idle {100 * statistics.median(self.idle):.1f} %"
            " of the time):",
            "| threads of | on a core | waiting for one | context switches |",
            "| --- | --- | --- | --- |",
            row("the exporter", self.exporter),
            row("the database server", self.server),
        ]
