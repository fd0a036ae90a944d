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
            if self._current is None or self._current.done():
                self._deadline = Deadline(runs_until, self._clock)
                self._current = self._executor.submit(self._call, self._deadline)
            else:
                self._deadline.extend(runs_until)
            return self._current
