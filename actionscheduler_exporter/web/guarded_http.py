"""uvicorn's HTTP/1.1 protocol (httptools' parser) with guards a scraper never notices
and slow or hostile clients do.

- A request's line and headers must arrive within `header_timeout` seconds of the
  connection (or of the previous response on a kept-alive one): a client that sends a
  partial request and waits (slowloris) is closed, instead of holding a file descriptor
  and memory for good. One timer per connection, armed when it starts waiting and
  checked when it fires, not re-armed per request (a small store's scrape is a few
  hundred microseconds of the exporter's CPU: docs/performance.md).
- A request's line and headers may take at most `MAX_HEADER_BYTES`: a client that sends
  headers without end is answered 431 and closed (httptools sets no such bound).
- At most `max_connections` connections at once, so the exporter never runs out of file
  descriptors ("accept(): out of system resource") and a flood cannot grow its memory
  without bound. At the cap the connection that has waited longest for its request line
  and headers is closed to make room (a flood of idle connections cannot lock a scraper
  out, who sends its request at once); only when every connection is busy with a request
  is the new one closed. The warning is written at most once per `WARNING_INTERVAL`
  seconds, with how many were closed since.
- With TLS the handshake happens inside this protocol (`loop.start_tls`), after the
  connection is counted and under the same header timeout: asyncio's own server-side TLS
  would hand over a connection only after its handshake, leaving connections that never
  finish one uncounted and open for a minute. The TLS settings are read from a holder
  for each new connection, so that a reload (SIGHUP) applies them all; a client
  certificate without one of `client_allowed_sans` is closed right after the handshake.

It builds on uvicorn's and asyncio's internals: guard_support.py checks them at start.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from asyncio import sslproto
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.web.guard_support import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
)
from actionscheduler_exporter.web.tls import ServerTLS, TLSHolder

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_HEADER_TIMEOUT", "DEFAULT_MAX_CONNECTIONS", "guarded_protocol"]
WARNING_INTERVAL = 10.0
# What h11, uvicorn's other parser, allows a request's line and headers (its
# max_incomplete_event_size): a scraper's request is a few hundred bytes.
MAX_HEADER_BYTES = 16 * 1024
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; "
    b"charset=utf-8\r\ncontent-length: 32\r\nconnection: close\r\n\r\n"
    b"Request header fields too large\n"
)


class _Refusals:
    """Connections closed at the cap, logged at most once per interval."""

    def __init__(self) -> None:
        self.unlogged = 0
        self.logged_at = float("-inf")

    def count(self, open_connections: int, what: str) -> None:
        self.unlogged += 1
        now = time.monotonic()
        if now - self.logged_at >= WARNING_INTERVAL:
            emit(log, logging.WARNING, "connections closed at --web.max-connections",
                 closed=self.unlogged, open=open_connections, last=what)  # fmt: skip
            self.unlogged = 0
            self.logged_at = now


def guarded_protocol(
    header_timeout: float, max_connections: int, tls: TLSHolder | None = None
) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn as `http=`, with these limits; while `tls`
    holds TLS settings, it does the TLS handshake itself (then give uvicorn no TLS
    settings of its own)."""

    class GuardedProtocol(_Guarded):
        pass

    GuardedProtocol.header_timeout = header_timeout
    GuardedProtocol.max_connections = max_connections
    GuardedProtocol.refusals = _Refusals()
    GuardedProtocol.tls = tls
    return GuardedProtocol


class _Guarded(HttpToolsProtocol):
    header_timeout = DEFAULT_HEADER_TIMEOUT
    max_connections = DEFAULT_MAX_CONNECTIONS
    refusals = _Refusals()
    tls: TLSHolder | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        # Since when it waits for a request's line and headers; None while one is answered.
        self._waiting_since: float | None = None
        self._in_head = False  # between a request's first byte and its headers' end
        self._header_bytes = 0  # of that request, so far
        self._encrypted = False  # the TLS handshake handed the connection over
        self._server_tls: ServerTLS | None = None  # the settings of its handshake

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            # The handshake this protocol started is done: the same connection, now
            # encrypted (counted, and its header timer running, since it was accepted).
            self._encrypted = True
            super().connection_made(transport)
            if self._server_tls is not None and not self._server_tls.allows(ssl_object):
                emit(log, logging.DEBUG, "closed a TLS connection: no allowed SAN")
                transport.close()
            return
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            oldest = self._oldest_waiting()
            if oldest is None:  # every other connection is busy with a request
                self.refusals.count(len(self.connections) - 1, "the new one, all are busy")
                self.transport.close()
                return
            self.refusals.count(len(self.connections) - 1, "the oldest one waiting for headers")
            oldest.transport.close()
        self._wait_for_headers()  # bounds the TLS handshake too
        self._server_tls = self.tls.current if self.tls is not None else None
        if self._server_tls is not None:
            self._start_tls(transport, self._server_tls.context)

    def _start_tls(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        """The handshake, under the header timeout. Once it is done the encrypted
        transport comes to `connection_made`, before any request's bytes do (asyncio's
        own `start_tls` hands it over only when its caller resumes, which may be after
        the first request has been read and answered in clear)."""
        handshake: asyncio.Future[None] = self.loop.create_future()
        secure = sslproto.SSLProtocol(
            self.loop,
            self,
            context,
            handshake,
            server_side=True,
            # typeshed says int; asyncio takes any number of seconds
            ssl_handshake_timeout=cast(int, self.header_timeout),
        )
        transport.set_protocol(secure)
        secure.connection_made(transport)

        def done(future: asyncio.Future[None]) -> None:
            # A failed or abandoned handshake (or a connection closed during it): closed,
            # and nothing logged per client. The TLS layer tells only a protocol it
            # handed a connection over to that the connection is lost.
            error = None if future.cancelled() else future.exception()
            if not self._encrypted:
                transport.close()
                self.connection_lost(error if isinstance(error, Exception) else None)

        handshake.add_done_callback(done)

    def _oldest_waiting(self) -> _Guarded | None:
        """The connection that has waited longest for a request's line and headers."""
        waiting = [
            other
            for other in self.connections
            if isinstance(other, _Guarded)
            and other is not self
            and other._waiting_since is not None
            and not other.transport.is_closing()
        ]
        return min(waiting, key=lambda other: cast(float, other._waiting_since), default=None)

    def data_received(self, data: bytes) -> None:
        # Counted from a request's first byte to the end of its headers, whether it is
        # awaited or comes pipelined behind one being answered. The read that starts a
        # request is not counted (it may end the one before): 16 KiB and one read at most.
        if self._in_head:
            self._header_bytes += len(data)
        super().data_received(data)
        too_large = self._in_head and self._header_bytes > MAX_HEADER_BYTES
        if too_large and not self.transport.is_closing():
            # Still no end of the headers: refused as h11 would (an answer under way
            # is not cut into: then the connection is closed alone).
            if self.cycle is None or self.cycle.response_complete:
                self.transport.write(_TOO_LARGE)
            self.transport.close()

    def on_message_begin(self) -> None:
        self._in_head, self._header_bytes = True, 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._in_head, self._header_bytes = False, 0
        self._waiting_since = None  # a request arrived whole
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        # A pipelined request read meanwhile starts now: no wait for headers begins.
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._wait_for_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def _wait_for_headers(self) -> None:
        """From now on the next request's line and headers must come within the timeout.
        The timer, once armed, stays: it looks again when it fires."""
        self._waiting_since = self.loop.time()
        if self._header_timer is None:
            self._header_timer = self.loop.call_at(
                self._waiting_since + self.header_timeout, self._header_timer_fired
            )

    def _header_timer_fired(self) -> None:
        self._header_timer = None
        since = self._waiting_since
        if since is None or self.transport.is_closing():
            return  # a request is answered: its response's end starts the next wait
        due = since + self.header_timeout
        if self.loop.time() >= due:
            self.transport.close()
        else:  # it waited for an earlier request: what is left of this wait
            self._header_timer = self.loop.call_at(due, self._header_timer_fired)
