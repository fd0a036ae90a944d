"""The processes a process started, as Linux lists them: an exporter's helper processes
(`processes` above one), for the tests and the benchmark."""

from __future__ import annotations

import contextlib
import os


def children(pid: int) -> list[int]:
    """The processes `pid` started and that run now (listed per thread)."""
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        for task in os.listdir(f"/proc/{pid}/task"):
            path = f"/proc/{pid}/task/{task}/children"
            with contextlib.suppress(FileNotFoundError), open(path, encoding="ascii") as listed:
                found += [int(child) for child in listed.read().split()]
    return found
