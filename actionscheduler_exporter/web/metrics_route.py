"""The telemetry path (/metrics), answered by a plain ASGI app in front of FastAPI's.

A scrape is the one request that comes every few seconds. Through FastAPI's routing it
went through six layers of middleware, a route match, dependency solving, a Request and a
Response object: a sixth of the CPU of a small store's scrape (docs/performance.md).
Here the scrape's three headers are read from the ASGI scope and the answer is sent in
two messages, or in pieces as it is written when it is large; every other path goes on
to the FastAPI app (`app.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from starlette.types import ASGIApp, Receive, Scope, Send

from actionscheduler_exporter.exposition.family_parts import Gathering
from actionscheduler_exporter.exposition.render import answer_parts, gather, negotiate
from actionscheduler_exporter.scrape.budget import BudgetError, ScrapeBudget
from actionscheduler_exporter.web import encoding
from actionscheduler_exporter.web.kept_gzip import KeptGzip
from actionscheduler_exporter.web.serving import CurrentServing

SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
_TIMEOUT = SCRAPE_TIMEOUT_HEADER.lower().encode("latin-1")
_ACCEPT = b"accept"
_ACCEPT_ENCODING = b"accept-encoding"
_READ = (_TIMEOUT, _ACCEPT, _ACCEPT_ENCODING)
_METHODS = ("GET", "HEAD")
# Bytes of the answer sent at once when more follows: a larger answer goes in pieces of at
# least this (each at most one part more: a few hundred kB of text).
_PIECE = 256 * 1024
# The body depends on Accept too (text, OpenMetrics, protobuf): a cache keys on both.
_VARY = (b"vary", b"Accept, Accept-Encoding")
_PLAIN = b"text/plain; charset=utf-8"


class MetricsRoute:
    """Answers GET and HEAD of `path`, and refuses its other methods (405); passes every
    other request, and the lifespan, to `app`."""

    def __init__(self, app: ASGIApp, live: CurrentServing, path: str) -> None:
        self.app = app
        self.live = live
        self.path = path
        self._gzip = KeptGzip()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path:
            await self.app(scope, receive, send)
        elif scope["method"] not in _METHODS:
            headers = [(b"allow", b"GET, HEAD")]
            await _send(send, 405, b"Method Not Allowed\n", _PLAIN, headers)
        else:
            await self._scrape(scope, receive, send)

    async def _scrape(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _first_values(scope["headers"])
        try:
            budget = ScrapeBudget.from_header(headers.get(_TIMEOUT))
        except BudgetError as error:
            problem = f"{SCRAPE_TIMEOUT_HEADER} {error}\n".encode()
            await _send(send, 400, problem, _PLAIN, [])
            return
        # The scrape protocol of `Coordinator.scrape`, with an awaitable wait. Joining may
        # wait for a first listing of databases, and the results for the Kubernetes API:
        # then they run off the event loop; else on it, without two thread hand-offs (a
        # tenth of a small store's scrape).
        serving = self.live.current  # a reload may replace it meanwhile
        coordinator = serving.coordinator
        accept = headers.get(_ACCEPT)
        # The helper processes read their parts of the sites meanwhile (`split`).
        content_type = negotiate(accept)
        asked = serving.helpers.ask(budget, content_type)
        if coordinator.begin_may_wait:
            pending = await asyncio.to_thread(coordinator.begin, budget)
        else:  # never waits on the loop, whatever a reload adds meanwhile
            pending = coordinator.begin(budget, wait_for_listings=False)
        await pending.settled()
        if pending.results_may_wait:
            results = await asyncio.to_thread(pending.results)
        else:
            results = pending.results()
        # This process's families are gathered while the helpers send theirs.
        own = gather(results, content_type)
        others: list[Gathering] = []
        if asked.waiting:
            others, missing = await asyncio.to_thread(asked.answers)
            if missing:  # a helper's sites, reported as down
                others.append(gather(missing, content_type, apart=True))
        exporter = self.live.reloads.samples()
        parts = answer_parts(own, content_type, exporter, others)
        extra = [_VARY]
        # Prometheus asks for gzip: a thousand sites' answer is megabytes of text, a tenth
        # of it compressed, most of it as the last scrape's was (`kept_gzip`).
        body: Iterator[bytes]
        if encoding.chosen(headers.get(_ACCEPT_ENCODING)) == encoding.GZIP:
            body = self._gzip.gzipped(parts, content_type)
            extra.append((b"content-encoding", b"gzip"))
        else:
            self._gzip.forget()  # not held for a scraper that does not ask for gzip
            body = map(b"".join, parts)
        await _send_parts(send, receive, scope, body, content_type.encode("latin-1"), extra)


async def _send_parts(
    send: Send,
    receive: Receive,
    scope: Scope,
    parts: Iterator[bytes],
    content_type: bytes,
    headers: list[tuple[bytes, bytes]],
) -> None:
    """The answer as one body with its length when it is small (one store's, most
    answers), else in pieces of at least `_PIECE` bytes as they are written (a thousand
    stores'): held whole, a 15 MB exposition was copied once more into one body and once
    more into the socket's buffer, 31 MiB over the process's resident size at every
    scrape, past the chart's memory limit. The server sends the pieces chunked, and waits
    while the client has not read the last ones (its flow control). An answer that ends
    before a piece is full goes whole: chunked, it would be copied once more. HEAD gets
    the length of what GET would send; HTTP/1.0, which has no chunks, gets it whole.
    Once the client has gone (a scraper that stopped waiting), nothing more is written."""
    if scope["method"] == "HEAD":
        await _start(send, 200, content_type, headers, sum(len(part) for part in parts))
        await send({"type": "http.response.body", "body": b""})
        return
    if scope.get("http_version") == "1.0":
        await _send(send, 200, b"".join(parts), content_type, headers)
        return
    pending: list[bytes] = []
    size = 0
    gone: asyncio.Task[None] | None = None  # ends when the client has gone
    try:
        for part in parts:
            if size >= _PIECE:  # a piece, and more comes after it
                if gone is None:
                    await _start(send, 200, content_type, headers, None)
                    gone = asyncio.create_task(_until_gone(receive))
                piece = b"".join(pending)
                pending.clear()
                size = 0
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                # A turn of the loop per piece: the client's leaving is seen, and other
                # requests are answered meanwhile.
                await asyncio.sleep(0)
                if _has_gone(gone):
                    return
            pending.append(part)
            size += len(part)
        if gone is not None:
            await send({"type": "http.response.body", "body": b"".join(pending)})
        else:
            await _send(send, 200, b"".join(pending), content_type, headers)
    finally:
        if gone is not None:
            gone.cancel()


async def _until_gone(receive: Receive) -> None:
    """Returns when the server tells that the client has gone (or the answer is over)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _has_gone(watch: asyncio.Task[None]) -> bool:
    """Whether the watch saw the client leave; a watch that failed (a server whose
    `receive` raises) tells nothing, and the answer goes on."""
    return watch.done() and not watch.cancelled() and watch.exception() is None


async def _start(
    send: Send,
    status: int,
    content_type: bytes,
    headers: list[tuple[bytes, bytes]],
    length: int | None,
) -> None:
    """The answer's headers; without a length, the server sends the body chunked."""
    start = [(b"content-type", content_type), *headers]
    if length is not None:
        start.insert(0, (b"content-length", str(length).encode()))
    await send({"type": "http.response.start", "status": status, "headers": start})


def _first_values(raw: list[tuple[bytes, bytes]]) -> dict[bytes, str]:
    """The first value of each header the scrape reads (names come lowercase in ASGI)."""
    found: dict[bytes, str] = {}
    for name, value in raw:
        if name in _READ and name not in found:
            found[name] = value.decode("latin-1")
    return found


async def _send(
    send: Send, status: int, body: bytes, content_type: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    """The whole answer; for HEAD, the server sends the headers alone."""
    await _start(send, status, content_type, headers, len(body))
    await send({"type": "http.response.body", "body": body})
