"""Measurements shared by the benchmark's cases: timed HTTP scrapes, the server's handler
counters (rows examined), a process's resident memory, and medians."""

from __future__ import annotations

import os
import statistics
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql

from testbed.rows_read import rows_read


@dataclass(frozen=True)
class Timings:
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    def as_dict(self) -> dict[str, float | int]:
        return {"median_s": self.median, "p95_s": self.p95, "count": len(self.samples)}


def timed(call: Callable[[], object], repeat: int) -> Timings:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return Timings(tuple(samples))


def timed_side_by_side(
    first: Callable[[], object], second: Callable[[], object], repeat: int
) -> tuple[Timings, Timings]:
    """Both calls timed in turn, so that whatever slows the machine meanwhile slows both."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for call, samples in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            call()
            samples.append(time.perf_counter() - started)
    return Timings(tuple(times[0])), Timings(tuple(times[1]))


def http_get(url: str, timeout: float = 120) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return str(response.read().decode())


def resident_mib(pid: int) -> tuple[float, float]:
    """Resident memory now and at its peak (VmRSS, VmHWM), in MiB."""
    fields: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def proportional_mib(pid: int) -> float:
    """The process's share of the memory it uses (Pss: each page shared with other
    processes counted in parts), in MiB: summed over processes, each page once, as a
    container's memory counts it."""
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            key, _, value = line.partition(":")
            if key == "Pss":
                return int(value.split()[0]) / 1024
    raise ValueError(f"no Pss in /proc/{pid}/smaps_rollup")


def rows_examined_per_call(
    connection: pymysql.connections.Connection[Any], call: Callable[[], object], repeat: int
) -> float:
    """Rows the server read per call, less what reading the counters itself costs.

    Nothing else may use the server meanwhile: the counters are global, so that the rows
    another process (the exporter) reads are counted.
    """
    first = rows_read(connection)
    overhead = rows_read(connection) - first
    before = rows_read(connection)
    for _ in range(repeat):
        call()
    after = rows_read(connection)
    return max(0.0, (after - before - overhead) / repeat)


def metric_values(exposition: str, name: str) -> dict[str, float]:
    """Samples of one metric from a text exposition, by their label text."""
    values: dict[str, float] = {}
    for line in exposition.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line[len(name) :].rpartition(" ")
            values[labels] = float(value)
    return values


# When each background source was last read: the timestamp since 2026-12-07, the age in
# the exporters before it (a baseline of `bench.run` may be one).
HEAVY_READ = (
    "actionscheduler_exporter_collector_last_success_timestamp_seconds",
    "actionscheduler_exporter_collector_age_seconds",
)


def heavy_reads(exposition: str) -> dict[str, float]:
    """The background sources' read times (or ages) of a text exposition, by label text:
    a source is there once it was read."""
    found: dict[str, float] = {}
    for name in HEAVY_READ:
        found.update(metric_values(exposition, name))
    return found


def process_cpu_seconds(pid: int) -> float:
    """CPU time (user and system) a process has used so far, from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        # The command name may hold spaces: the fields after its closing parenthesis.
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms(seconds: float) -> str:
    """Seconds as milliseconds, as the tables print them."""
    return f"{seconds * 1000:.1f} ms"
