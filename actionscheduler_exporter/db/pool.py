"""A bounded set of connections per database server, shared by every site on it.

An agency's exporter reads hundreds of databases on a few servers. One connection per site
would hold hundreds open, and a server with MySQL's default `max_connections` (151) would
refuse the exporter, then the shops. So all sites of a server (and both tiers) borrow from
one pool of at most `connections_per_server` connections: a borrowed connection reads
any database of its server (statements name the database of their tables), and is
handed back at the end of the round or refresh, open, for the next site with the same
login.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pymysql.err

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.slots import FairSlots

# Who a connection is logged in as: a connection is reused only for a site with the same
# login. Not how long its statements may run: a borrower with another query timeout sets
# its own on the connection (`db.session`), so that the heavy tier's refreshes (with
# `heavy_query_timeout`) take turns on the rounds' connections, instead of closing one of
# them to open their own and the next round doing the reverse.
Login = tuple[Any, ...]
# An idle connection older than this is closed, not reused: load balancers and proxies
# drop idle connections silently (AWS's after 350 s, a short wait_timeout sooner).
MAX_IDLE_SECONDS = 120.0


def login_of(site: SiteConfig) -> Login:
    return (site.user, site.password, site.tls)


def reader_of(site: SiteConfig) -> Login:
    """Who reads and how long a statement may run: the stores one statement may read
    together (`db.read_ahead`) share both."""
    return (site.user, site.password, site.tls, site.query_timeout)


@dataclass
class Pooled:
    """An open connection and what was learnt when it was opened."""

    connection: pymysql.connections.Connection[Any]
    login: Login
    # The query timeout the connection's statements are bounded by now (its session's
    # variables and the client's read timeout).
    bound: float
    server_version: str = ""
    grants: list[str] | None = None  # SHOW GRANTS, once read
    # Taken from the pool's idle ones (the network may have dropped it since), and when.
    reused: bool = False
    # Borrowed by a background refresh, which lets the rounds go first (`db.slots`).
    background: bool = False
    idle_since: float = 0.0
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            # The server side may already be gone; there is nothing more to release then.
            with contextlib.suppress(pymysql.err.Error):
                self.connection.close()


class ServerPool:
    def __init__(self, endpoint: str, size: int) -> None:
        self.endpoint = endpoint
        self.size = size
        self._slots = FairSlots(size)  # in turn, the rounds before the refreshes
        self._lock = threading.Lock()
        self.borrows = 0  # connections handed out so far (tests, benchmarks)
        self._idle: list[Pooled] = []  # most recently returned last
        self._in_use = 0
        # Closed with the exporter (or its lane): a connection handed back later, by a
        # refresh that was running then, is closed instead of kept.
        self._closed = False

    def acquire(
        self,
        site: SiteConfig,
        wait: float,
        open_new: Callable[[], Pooled],
        *,
        background: bool = False,
    ) -> Pooled:
        """A connection for the site, waiting at most `wait` seconds for a free one;
        `background`: for a refresh, which lets the rounds go first."""
        if not self._slots.acquire(wait, background=background):
            raise QueryError(
                "connect",
                f"all {self.size} connections to {self.endpoint} stayed busy for {wait:.0f}s "
                "(connections_per_server)",
                connection_lost=True,
            )
        try:
            # Any database of the server: statements name their tables' database
            # (`db.schema.TableNames`). A connection the network dropped while it was
            # idle fails its first statement, which the session sends again on a new one.
            pooled = self._take_idle(site) or open_new()
        except BaseException:
            self._give_back_slot(background)
            raise
        pooled.background = background
        self.borrows += 1  # under the slot, not the lock: a count for tests, not exact
        return pooled

    def release(self, pooled: Pooled) -> None:
        """Back to the pool, open, for the next site with the same login."""
        pooled.idle_since = time.monotonic()
        with self._lock:
            closed = self._closed
            if not closed:
                self._idle.append(pooled)
            self._in_use -= 1
        if closed:
            pooled.close()
        self._slots.release(background=pooled.background)

    def discard(self, pooled: Pooled) -> None:
        """Closes a connection in an unknown state instead of handing it back."""
        pooled.close()
        self._give_back_slot(pooled.background)

    def idle_connections(self) -> list[Pooled]:
        with self._lock:
            return list(self._idle)

    def open_connections(self) -> int:
        with self._lock:
            return self._in_use + len(self._idle)

    def close_idle(self) -> None:
        """Closes every idle connection (one of them was found dropped by the network)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for pooled in idle:
            pooled.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.close_idle()

    def _take_idle(self, site: SiteConfig) -> Pooled | None:
        login = login_of(site)
        now = time.monotonic()
        chosen = None
        with self._lock:
            self._in_use += 1
            idle = self._idle
            stale = [p for p in idle if now - p.idle_since > MAX_IDLE_SECONDS]
            if stale:
                idle = self._idle = [p for p in idle if now - p.idle_since <= MAX_IDLE_SECONDS]
            # The most recently returned of the login: bound as the site needs, else (while
            # the pool is full) any of the login, which the session binds again; a pool
            # with room opens a new one instead, so that each tier keeps connections of
            # its own bound and a round sends no statement to set it. Taken out by its
            # place (a Pooled's generated == compares every field).
            room = self._in_use + len(idle) <= self.size
            place = self._idle_place(idle, login, site.query_timeout, any_bound=not room)
            if place is not None:
                chosen = idle.pop(place)
                chosen.reused = True
        for pooled in stale:
            pooled.close()
        if chosen is not None:
            return chosen
        with self._lock:
            # A new connection is opened: close idle ones of other logins to stay in bound.
            surplus = max(0, self._in_use + len(self._idle) - self.size)
            closing, self._idle = self._idle[:surplus], self._idle[surplus:]
        for pooled in closing:
            pooled.close()
        return None

    @staticmethod
    def _idle_place(
        idle: list[Pooled], login: Login, bound: float, *, any_bound: bool
    ) -> int | None:
        """Where the most recently returned idle connection of the login is that is bound
        by the query timeout `bound`; `any_bound`: else of any bound."""
        fallback = None
        for place in range(len(idle) - 1, -1, -1):
            found = idle[place]
            if found.login is login or found.login == login:
                if found.bound == bound:
                    return place
                if fallback is None and any_bound:
                    fallback = place
        return fallback

    def _give_back_slot(self, background: bool) -> None:
        with self._lock:
            self._in_use -= 1
        self._slots.release(background=background)
