"""Refresh in a thread, serve the last reading, wait at most as long as the caller may.

Every background source goes through this one helper: the heavy tier (totals that grow
with the table) and the Kubernetes workers. A refresh starts when the last one started
`interval` seconds ago or more and none is running, so two never overlap; the caller gets
the latest value at once, or waits for the refresh within its budget when it has no value
yet (or, with `wait_each`, for every refresh).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from exporter.sources.source import Clock

T = TypeVar("T")


class BackgroundRefresh(Generic[T]):
    def __init__(
        self,
        name: str,
        interval: float,
        refresh: Callable[[T | None], T],
        clock: Clock,
        *,
        wait_each: bool = False,
    ) -> None:
        """`refresh` gets the previous value (None at first) and returns the new one; it
        must not raise."""
        self._name = name
        self._interval = interval
        self._refresh = refresh
        self._clock = clock
        self._wait_each = wait_each
        self._lock = threading.Lock()
        self._value: T | None = None
        self._thread: threading.Thread | None = None
        self._last_start: float | None = None

    def latest(self, budget: float) -> T | None:
        """The latest value, after starting a refresh if one is due."""
        with self._lock:
            running = self._thread is not None and self._thread.is_alive()
            if not running and (
                self._last_start is None or self._clock() - self._last_start >= self._interval
            ):
                self._last_start = self._clock()
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
                running = True
            thread = self._thread
            wait = running and (self._wait_each or self._value is None)
        if wait and thread is not None:
            thread.join(max(0.0, budget))
        with self._lock:
            return self._value

    def peek(self) -> T | None:
        """The latest value; never starts a refresh."""
        with self._lock:
            return self._value

    def _run(self) -> None:
        with self._lock:
            previous = self._value
        value = self._refresh(previous)
        with self._lock:
            self._value = value
