"""What the exporter holds per database server, its lane: the connection pool, the threads
that run the rounds of its sites, the one that runs their heavy refreshes, and the
read-ahead of its stores' hot statements.

Sites on a slow, locked or unreachable server wait in their own lane: they can take its
connections and threads, never another server's. Within a lane, at most
`connections_per_server` rounds run at once (one connection each), and heavy refreshes run
one after the other, so a thousand sites' refreshes are spread out, not started together.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.pool import ServerPool
from actionscheduler_exporter.db.read_ahead import ReadAhead
from actionscheduler_exporter.db.refresh_together import RefreshTogether

P = ParamSpec("P")
T = TypeVar("T")


class RefreshQueue(ThreadPoolExecutor):
    """One thread for the heavy refreshes of a server's sites, which knows how many wait in
    it, and how many table prefixes of its sources have no first value yet. A first refresh
    is waited for (`BackgroundRefresh`) only while those prefixes are at most `waited` and
    it is not queued behind more than `waited` others: the rounds running side by side (one
    per connection) each wait for their own, but a thousand sites' first scrape would move
    at the pace of this one thread (each round waiting for its refresh, the queue never
    growing long enough to stop the next from waiting)."""

    def __init__(self, name: str, waited: int) -> None:
        super().__init__(1, thread_name_prefix=name)
        self.waited = waited
        # Reentrant: a dropped source's weak reference may call back while it is held.
        self._count_lock = threading.RLock()
        self._queued = 0
        # Sources without a first value (by id), weighted by the table prefixes they read,
        # and the sum of the weights; a source dropped (a site removed) leaves by itself.
        self._first_due: dict[int, tuple[weakref.ref[object], int]] = {}
        self._first_due_total = 0

    def expect_first(self, source: object, prefixes: int) -> None:
        """`source` has no value yet, and its first refresh reads `prefixes` prefixes."""
        key, weight = id(source), max(1, prefixes)
        with self._count_lock:
            known = self._first_due.get(key)
            if known is not None and known[1] == weight:
                return
            reference = known[0] if known else weakref.ref(source, lambda _: self._forget(key))
            self._first_due_total += weight - (known[1] if known else 0)
            self._first_due[key] = (reference, weight)

    def got_first(self, source: object) -> None:
        self._forget(id(source))

    def _forget(self, key: int) -> None:
        with self._count_lock:
            known = self._first_due.pop(key, None)
            if known is not None:
                self._first_due_total -= known[1]

    @property
    def first_values_due(self) -> int:
        """Table prefixes whose source has no first value yet."""
        with self._count_lock:
            return self._first_due_total

    @property
    def queued(self) -> int:
        """Refreshes submitted and not finished, the running one included."""
        with self._count_lock:
            return self._queued

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._count_lock:
            self._queued += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._finished(None)
            raise
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: object) -> None:
        with self._count_lock:
            self._queued -= 1


@dataclass
class ServerLane:
    pool: ServerPool
    rounds: ThreadPoolExecutor
    # The subsites of a network, read side by side for its round (never waiting on others).
    prefixes: ThreadPoolExecutor
    refreshes: RefreshQueue
    # The hot statements of its stores, read several at a time.
    read_ahead: ReadAhead = field(default_factory=ReadAhead)
    # Its stores' cached readings, refreshed several at a time.
    refresh_together: RefreshTogether = field(default_factory=RefreshTogether)

    def close(self) -> None:
        for executor in (self.rounds, self.prefixes, self.refreshes):
            executor.shutdown(wait=False, cancel_futures=True)
        self.pool.close()


def server_of(site: SiteConfig) -> str:
    return site.unix_socket or f"{site.host}:{site.port}"


class DatabaseServers:
    """A `ServerLane` per database server, made on first use."""

    def __init__(self, connections_per_server: int) -> None:
        self._size = connections_per_server
        self._lanes: dict[str, ServerLane] = {}
        self._lock = threading.Lock()

    def for_site(self, site: SiteConfig) -> ServerLane:
        server = server_of(site)
        with self._lock:
            lane = self._lanes.get(server)
            if lane is None:
                name = server.replace("/", "_")
                lane = self._lanes[server] = ServerLane(
                    ServerPool(server, self._size),
                    ThreadPoolExecutor(self._size, thread_name_prefix=f"round-{name}"),
                    ThreadPoolExecutor(self._size, thread_name_prefix=f"prefix-{name}"),
                    RefreshQueue(f"heavy-{name}", waited=self._size),
                )
            return lane

    def open_connections(self) -> dict[str, int]:
        with self._lock:
            return {server: lane.pool.open_connections() for server, lane in self._lanes.items()}

    def close(self) -> None:
        with self._lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            lane.close()
