"""A server's connection slots, handed out in the order they were asked for, the rounds'
before the background refreshes'.

A semaphore lets the thread that gives a slot back take it again at once, before the
thread it woke runs: the server's round threads, each taking a slot per site, kept
taking theirs while the heavy tier's refresh held one, and a round that had asked first
waited the whole query timeout, and its site was reported down ("all 4 connections ...
stayed busy for 5s") on a server that answered every statement in milliseconds (a
thousand databases' first scrapes on a busy machine: docs/performance.md). Here a slot
given back while rounds wait goes to the one that has waited longest.

A refresh (the heavy tier, in the background) takes a slot only while the rounds leave
one to spare, or hold none: a scrape's rounds, which Prometheus and KEDA wait for, are
not slowed by a quarter when the heavy tier has a thousand first refreshes queued. So
that back-to-back scrapes cannot keep it waiting for ever, a refresh that has waited
`patience` seconds takes the next slot given back that no round waits for.
"""

from __future__ import annotations

import threading
import time
from collections import deque

# How long a refresh lets the rounds go first.
BACKGROUND_PATIENCE = 5.0


class _Waiter:
    __slots__ = ("asked_at", "handed")

    def __init__(self) -> None:
        self.asked_at = time.monotonic()
        self.handed = threading.Event()


class FairSlots:
    def __init__(self, size: int, patience: float = BACKGROUND_PATIENCE) -> None:
        self.size = size
        self._patience = patience
        self._free = size
        self._held_by_rounds = 0
        self._lock = threading.Lock()
        # The oldest ask first, in each line.
        self._rounds: deque[_Waiter] = deque()
        self._background: deque[_Waiter] = deque()

    def acquire(self, timeout: float, *, background: bool = False) -> bool:
        """A slot, waiting at most `timeout` seconds behind those who go first."""
        line = self._background if background else self._rounds
        with self._lock:
            if self._free and not self._rounds:
                if not background:
                    self._free -= 1
                    self._held_by_rounds += 1
                    return True
                if not self._background and self._rounds_spare_one():
                    self._free -= 1
                    return True
            waiter = _Waiter()
            line.append(waiter)
        try:
            if waiter.handed.wait(max(0.0, timeout)):
                return True
        except BaseException:  # interrupted: a slot handed over meanwhile goes on
            self._leave(waiter, line, background, keep=False)
            raise
        return self._leave(waiter, line, background, keep=True)

    def release(self, *, background: bool = False) -> None:
        """Gives a slot back: to the round waiting longest, else to the refresh waiting
        longest if the rounds spare one or it has waited its patience, else free."""
        with self._lock:
            if not background:
                if self._held_by_rounds <= 0:
                    raise ValueError("a round's slot was given back that was not taken")
                self._held_by_rounds -= 1
            if self._rounds:
                self._held_by_rounds += 1
                self._rounds.popleft().handed.set()
                return
            if self._background and (
                self._rounds_spare_one()
                or time.monotonic() - self._background[0].asked_at >= self._patience
            ):
                self._background.popleft().handed.set()
                return
            if self._free >= self.size:
                raise ValueError("a slot was given back that was not taken")
            self._free += 1

    def _rounds_spare_one(self) -> bool:
        """Whether the rounds hold none of the slots, or leave two: one for the refresh,
        and one for them to turn over on."""
        held = self._held_by_rounds
        return held == 0 or held < self.size - 1

    def _leave(
        self, waiter: _Waiter, line: deque[_Waiter], background: bool, *, keep: bool
    ) -> bool:
        """Leaves the line after a wait that ran out (or broke): True when the slot was
        handed over just then and is kept; one not kept goes on as given back."""
        with self._lock:
            if not waiter.handed.is_set():
                line.remove(waiter)
                return False
        if keep:
            return True
        self.release(background=background)
        return False

    @property
    def waiting(self) -> int:
        """How many wait for a slot, rounds and refreshes (tests)."""
        with self._lock:
            return len(self._rounds) + len(self._background)
