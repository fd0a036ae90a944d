"""Concurrent callers share the call in flight instead of starting another."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Generic, TypeVar

from actionscheduler_exporter.timing import Clock, Deadline

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self, executor: Executor, call: Callable[[Deadline], T], clock: Clock) -> None:
        self._executor = executor
        self._call = call
        self._clock = clock
        self._lock = threading.Lock()
        self._current: Future[T] | None = None
        self._deadline = Deadline(0.0, clock)
        self.joins = 0  # callers so far, for diagnostics and tests

    def join(self, runs_until: float) -> Future[T]:
        """The call in flight, its deadline moved to this caller's `runs_until` (a clock
        time) if that is later, or a new call with that deadline when none is in flight."""
        with self._lock:
            self.joins += 1
            current = self._current
            if current is not None and not current.done():
                self._deadline.extend(runs_until)
                return current
            self._deadline = Deadline(runs_until, self._clock)
            current = self._current = self._executor.submit(self._call, self._deadline)
        # Outside the lock: a call already ended runs `_ended` here, at once.
        current.add_done_callback(self._ended)
        return current

    def _ended(self, call: Future[T]) -> None:
        """A call that ended is let go of (its lock, its result) once its callers have it:
        a thousand sites held one each between scrapes."""
        with self._lock:
            if self._current is call:
                self._current = None
