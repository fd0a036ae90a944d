"""The process's own metrics (`process_*`), with the names, help and values of
prometheus-client's ProcessCollector (and of the Go clients), read more cheaply.

The collector builds six metric families and reads /proc/self/limits on every scrape:
about 55 µs, then 30 µs more to write them, a twentieth of a small store's scrape
(docs/performance.md). Here /proc/self/stat is read once per scrape (from a descriptor
kept open), the open descriptors are counted, their limit is the soft RLIMIT_NOFILE (the
line the collector parses from /proc/self/limits), and the start time is read once.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
from typing import NamedTuple

_TICKS = float(os.sysconf("SC_CLK_TCK"))
_PAGE_SIZE = resource.getpagesize()


class ProcessSample(NamedTuple):
    name: str  # the family's name
    help: str
    kind: str  # "gauge" or "counter"
    value: float

    @property
    def sample_name(self) -> str:
        """A counter's sample adds "_total" to its family's name."""
        return self.name + "_total" if self.kind == "counter" else self.name


def _boot_time() -> float | None:
    try:
        with open("/proc/stat", "rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


_BOOT_TIME = _boot_time()
_stat_file: tuple[int, int] | None = None  # the process id, and its /proc/self/stat


def _stat() -> bytes:
    """/proc/self/stat as it is now, read again from the start of a descriptor kept open:
    procfs writes it afresh at each read (opening and closing it was a third of this
    module's time per scrape). A forked child closes the parent's and opens its own; one
    that fails is left as it is (its number may be another file's by now) and a new one
    opened."""
    global _stat_file
    pid = os.getpid()
    if _stat_file is not None:
        kept_by, descriptor = _stat_file
        if kept_by == pid:
            try:
                return os.pread(descriptor, 4096, 0)
            except OSError:
                pass
        else:
            with contextlib.suppress(OSError):
                os.close(descriptor)
    _stat_file = (pid, os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC))
    return os.pread(_stat_file[1], 4096, 0)


def _fields(stat: bytes) -> list[bytes]:
    """The fields of a /proc/<pid>/stat after the command name, which may hold spaces
    and parentheses (field 3 of proc(5) is the first)."""
    return stat.rpartition(b")")[2].split()


# The exporter's helper processes running now (`split`), and whether it ever had any.
_helpers: set[int] = set()
_helped = False


def helper_started(pid: int) -> None:
    """Counts a helper process's CPU and memory with this process's from now on."""
    global _helped
    _helpers.add(pid)
    _helped = True


def helper_ended(pid: int) -> None:
    """A helper process waited for: its CPU is in this process's children's now."""
    _helpers.discard(pid)


def _helpers_stat() -> tuple[float, float, float]:
    """The helper processes' CPU ticks, virtual and resident pages, summed; a helper
    gone meanwhile counts nothing (its CPU, once it is waited for, is in this process's
    children's)."""
    ticks = virtual = resident = 0.0
    for pid in list(_helpers):
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = _fields(stat.read())
        except OSError:
            continue
        ticks += float(fields[11]) + float(fields[12])
        virtual += float(fields[20])
        resident += float(fields[21])
    return ticks, virtual, resident


def process_samples() -> list[ProcessSample]:
    """Each sample the process collector would give now; none where /proc cannot be read
    (not Linux), as it gives none. Once the exporter has helper processes (`split`), the
    CPU and memory are the exporter's, theirs included: the CPU of those that ended too
    (this process's children's, once waited for), so that the counter does not fall when
    one is started again, or let go of at a reload. The descriptors are this process's,
    as their limit is."""
    if _BOOT_TIME is None:
        return []
    found: list[ProcessSample] = []
    try:
        fields = _fields(_stat())
    except OSError:
        fields = []
    ticks, virtual, resident = _helpers_stat() if _helped else (0.0, 0.0, 0.0)
    if fields:
        if _helped:  # the ended helpers' (cutime, cstime)
            ticks += float(fields[13]) + float(fields[14])
        found += [
            ProcessSample(
                "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge",
                float(fields[20]) + virtual,
            ),
            ProcessSample(
                "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge",
                (float(fields[21]) + resident) * _PAGE_SIZE,
            ),
            ProcessSample(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.", "gauge",
                float(fields[19]) / _TICKS + _BOOT_TIME,
            ),
            ProcessSample(
                "process_cpu_seconds", "Total user and system CPU time spent in seconds.",
                "counter", (float(fields[11]) + float(fields[12]) + ticks) / _TICKS,
            ),
        ]  # fmt: skip
    try:
        open_fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        return found
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return [
        *found,
        ProcessSample(
            "process_open_fds", "Number of open file descriptors.", "gauge", float(open_fds)
        ),
        ProcessSample(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            "gauge",
            math.inf if soft == resource.RLIM_INFINITY else float(soft),
        ),
    ]
