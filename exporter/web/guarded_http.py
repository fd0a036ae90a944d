"""uvicorn's HTTP/1.1 protocol with two guards a scraper never notices and slow clients do.

- A request's line and headers must arrive within `header_timeout` seconds of the
  connection (or of the previous response on a kept-alive one): a client that sends a
  partial request and waits (slowloris) is closed, instead of holding a file descriptor
  and memory for good.
- At most `max_connections` connections at once, so the exporter never runs out of file
  descriptors ("accept(): out of system resource") and a flood cannot grow its memory
  without bound. At the cap the connection that has waited longest for its request line
  and headers is closed to make room (a flood of idle connections cannot lock a scraper
  out, who sends its request at once); only when every connection is busy with a request
  is the new one closed. The warning is written at most once per `WARNING_INTERVAL`
  seconds, with how many were closed since.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 256
WARNING_INTERVAL = 10.0


class _Refusals:
    """Connections closed at the cap, logged at most once per interval."""

    def __init__(self) -> None:
        self.unlogged = 0
        self.logged_at = float("-inf")

    def count(self, open_connections: int, what: str) -> None:
        self.unlogged += 1
        now = time.monotonic()
        if now - self.logged_at >= WARNING_INTERVAL:
            log.warning(
                "%d connection(s) closed at --web.max-connections (%d open; the last: %s)",
                self.unlogged, open_connections, what,
            )  # fmt: skip
            self.unlogged = 0
            self.logged_at = now


def guarded_protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """The protocol class to give uvicorn as `http=`, with these limits."""

    class GuardedH11Protocol(_Guarded):
        pass

    GuardedH11Protocol.header_timeout = header_timeout
    GuardedH11Protocol.max_connections = max_connections
    GuardedH11Protocol.refusals = _Refusals()
    return GuardedH11Protocol


class _Guarded(H11Protocol):
    header_timeout = DEFAULT_HEADER_TIMEOUT
    max_connections = DEFAULT_MAX_CONNECTIONS
    refusals = _Refusals()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._waiting_cycle: object = None
        self._waiting_since = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            oldest = self._oldest_waiting()
            if oldest is None:  # every other connection is busy with a request
                self.refusals.count(len(self.connections) - 1, "the new one, all are busy")
                self.transport.close()
                return
            self.refusals.count(len(self.connections) - 1, "the oldest one waiting for headers")
            oldest.transport.close()
        self._arm_header_timer()

    def _oldest_waiting(self) -> _Guarded | None:
        """The connection that has waited longest for a request's line and headers."""
        waiting = [
            other
            for other in self.connections
            if isinstance(other, _Guarded)
            and other is not self
            and other._header_timer is not None
            and not other.transport.is_closing()
        ]
        return min(waiting, key=lambda other: other._waiting_since, default=None)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not self._waiting_cycle:  # a request arrived whole
            self._cancel_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._waiting_cycle = self.cycle
        self._waiting_since = self.loop.time()
        self._header_timer = self.loop.call_later(self.header_timeout, self._header_timed_out)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()
