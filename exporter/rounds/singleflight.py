"""Concurrent callers share the call in flight instead of starting another."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self, executor: Executor, call: Callable[[float], T]) -> None:
        self._executor = executor
        self._call = call
        self._lock = threading.Lock()
        self._current: Future[T] | None = None

    def join(self, deadline: float) -> Future[T]:
        """The call in flight, or a new one (with this caller's deadline) when none is."""
        with self._lock:
            if self._current is None or self._current.done():
                self._current = self._executor.submit(self._call, deadline)
            return self._current
