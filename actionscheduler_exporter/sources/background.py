"""Refresh in a thread, serve the last reading, wait at most as long as the caller may.

Every background source goes through this one helper: the heavy tier (totals that grow
with the table) and the Kubernetes workers. A refresh starts when the last one started
`interval` seconds ago or more and none is running, so two never overlap; the caller gets
the latest value at once, or waits for the refresh until the caller's deadline when it
has no value yet (or, with `wait_each`, for every refresh).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Generic, TypeVar

from actionscheduler_exporter.db.servers import RefreshQueue
from actionscheduler_exporter.errors import unexpected
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.timing import Clock

log = logging.getLogger(__name__)

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
        executor: Executor | None = None,
    ) -> None:
        """`refresh` gets the previous value (None at first) and returns the new one; it
        must not raise. With an `executor`, refreshes queue there (the heavy tier's, one
        lane per database server); without, each runs in a thread of its own."""
        self._name = name
        self._interval = interval
        self._refresh = refresh
        self._clock = clock
        self._wait_each = wait_each
        self._lock = threading.Lock()
        self._executor = executor
        self._queued: Future[None] | None = None  # the refresh submitted last, if queued
        self._value: T | None = None
        self._finished: threading.Event | None = None  # of the refresh started last
        self._last_start: float | None = None
        if isinstance(executor, RefreshQueue):
            executor.expect_first(self, 1)

    def latest(self, wait_seconds: float, prefixes: int = 1) -> T | None:
        """The latest value, after starting a refresh if one is due; a refresh that must
        be waited for is waited for at most `wait_seconds`. `prefixes`: how many table
        prefixes a refresh reads (what a first one costs the queue)."""
        with self._lock:
            if self._value is None and isinstance(self._executor, RefreshQueue):
                self._executor.expect_first(self, prefixes)
            running = self._finished is not None and not self._finished.is_set()
            if not running and (
                self._last_start is None or self._clock() - self._last_start >= self._interval
            ):
                self._last_start = self._clock()
                self._finished = finished = threading.Event()
                try:
                    self._start(lambda: self._run(finished))
                except RuntimeError:  # the executor is shut down: the exporter is stopping
                    finished.set()
                running = True
            finished_event = self._finished
            wait = running and (self._wait_each or self._value is None)
            if wait and not self._wait_each and self._behind_others():
                # A first value that waits behind other sources' refreshes would hold the
                # caller for theirs too (a thousand sites' first scrape): served next time.
                wait = False
        if wait and finished_event is not None:
            finished_event.wait(max(0.0, wait_seconds))
        with self._lock:
            return self._value

    def _behind_others(self) -> bool:
        """Whether this source's first refresh waits in its queue behind more others than
        the queue lets be waited for, or more first refreshes are due on it than that."""
        executor, queued = self._executor, self._queued
        if not isinstance(executor, RefreshQueue):
            return False
        if executor.first_values_due > executor.waited:
            return True
        return (
            queued is not None
            and not (queued.running() or queued.done())
            and executor.queued > executor.waited
        )

    def _start(self, run: Callable[[], None]) -> None:
        if self._executor is not None:
            self._queued = self._executor.submit(run)
        else:
            threading.Thread(target=run, name=self._name, daemon=True).start()

    def close(self) -> None:
        """No more values are wanted: a first one no longer counts as due on its queue (a
        dropped site's refresh may be held by a reference cycle until the next collection)."""
        if isinstance(self._executor, RefreshQueue):
            self._executor.got_first(self)

    def peek(self) -> T | None:
        """The latest value; never starts a refresh."""
        with self._lock:
            return self._value

    def _run(self, finished: threading.Event) -> None:
        try:
            with self._lock:
                previous = self._value
            value = self._refresh(previous)
            with self._lock:
                self._value = value
                if isinstance(self._executor, RefreshQueue):
                    self._executor.got_first(self)
        except Exception as error:
            # `refresh` must not raise; if it does, the last value is served and the next
            # refresh starts when it is due, instead of the thread dying unseen.
            emit(log, logging.ERROR, "a background refresh failed", refresh=self._name,
                 error=unexpected(error))  # fmt: skip
        finally:
            finished.set()
            # A refresh ended is as none started: its event and future are let go of (a
            # thousand sites held 2,000 of each, with their locks: 1.5 MiB).
            with self._lock:
                if self._finished is finished:
                    self._finished = self._queued = None
