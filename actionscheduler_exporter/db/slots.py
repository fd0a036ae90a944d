"""A server's connection slots, handed out in the order they were asked for.

A semaphore lets the thread that gives a slot back take it again at once, before the
thread it woke runs: the server's round threads, each taking a slot per site, kept
taking theirs while the heavy tier's refresh held one, and a round that had asked first
waited the whole query timeout, and its site was reported down ("all 4 connections ...
stayed busy for 5s") on a server that answered every statement in milliseconds (a
thousand databases' first scrapes on a busy machine: docs/performance.md). Here a slot
given back while others wait goes to the one that has waited longest.
"""

from __future__ import annotations

import threading
from collections import deque


class FairSlots:
    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._lock = threading.Lock()
        self._waiting: deque[threading.Event] = deque()  # the oldest ask first

    def acquire(self, timeout: float) -> bool:
        """A slot, waiting at most `timeout` seconds behind those who asked before."""
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return True
            handed = threading.Event()
            self._waiting.append(handed)
        try:
            if handed.wait(max(0.0, timeout)):
                return True
        except BaseException:  # interrupted: a slot handed over meanwhile goes on
            self._leave(handed, keep=False)
            raise
        return self._leave(handed, keep=True)

    def _leave(self, handed: threading.Event, *, keep: bool) -> bool:
        """Leaves the line after a wait that ran out (or broke): True when the slot was
        handed over just then and is kept; one not kept goes to the next in line."""
        with self._lock:
            if not handed.is_set():
                self._waiting.remove(handed)
                return False
        if keep:
            return True
        self.release()
        return False

    def release(self) -> None:
        """Gives a slot back: to the one waiting longest, if any."""
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
                return
            if self._free >= self.size:
                raise ValueError("a slot was given back that was not taken")
            self._free += 1

    @property
    def waiting(self) -> int:
        """How many wait for a slot (tests)."""
        with self._lock:
            return len(self._waiting)
