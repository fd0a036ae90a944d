"""The HTTP face of the exporter: /metrics, /healthz and a landing page, assembled with
the auth middleware (protect.py), the content coding (encoding.py) and the page
(landing.py)."""

from __future__ import annotations

import asyncio
import gzip

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, PlainTextResponse

from actionscheduler_exporter import __version__
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.scrape.budget import BudgetError, ScrapeBudget
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.web import encoding
from actionscheduler_exporter.web.landing import landing_page
from actionscheduler_exporter.web.middleware import AuthAndHeaders
from actionscheduler_exporter.web.serving import CurrentServing, ServedWith
from actionscheduler_exporter.web.webconfig import WebConfig

SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
# Bytes compressed on the event loop (about a millisecond at gzip's fastest level).
_COMPRESS_ON_LOOP = 256 * 1024


def create_app(
    coordinator: Coordinator,
    web: WebConfig | None = None,
    live: CurrentServing | None = None,
    *,
    telemetry_path: str = "/metrics",
) -> FastAPI:
    """`live`: a holder whose `ServedWith` a reload replaces (the server's); by default one
    of the app's own, serving `coordinator` and `web` for good."""
    app = FastAPI(
        title="actionscheduler-exporter",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    live = live or CurrentServing(ServedWith.of(coordinator, web or WebConfig()))
    app.state.live = live
    app.add_middleware(AuthAndHeaders, live=live)

    @app.api_route(telemetry_path, methods=["GET", "HEAD"])
    async def metrics(request: Request) -> Response:
        try:
            budget = ScrapeBudget.from_header(request.headers.get(SCRAPE_TIMEOUT_HEADER))
        except BudgetError as error:
            return PlainTextResponse(f"{SCRAPE_TIMEOUT_HEADER} {error}\n", status_code=400)
        # The scrape protocol of `Coordinator.scrape`, with an awaitable wait. Joining may
        # wait for a first listing of databases, and the results for the Kubernetes API:
        # then they run off the event loop; else on it, without two thread hand-offs (a
        # tenth of a small store's scrape).
        coordinator = live.current.coordinator  # a reload may replace it meanwhile
        if coordinator.begin_may_wait:
            pending = await asyncio.to_thread(coordinator.begin, budget)
        else:  # never waits on the loop, whatever a reload adds meanwhile
            pending = coordinator.begin(budget, wait_for_listings=False)
        await pending.settled()
        if pending.results_may_wait:
            results = await asyncio.to_thread(pending.results)
        else:
            results = pending.results()
        body, content_type = render(
            results, request.headers.get("accept"), exporter=live.reloads.samples()
        )
        headers = {}
        # Prometheus asks for gzip: a thousand sites' answer is megabytes of text, a tenth
        # of it compressed (the fastest level: the CPU is the scrape's, the bytes are not).
        if encoding.chosen(request.headers.get("accept-encoding")) == encoding.GZIP:
            # zlib lets go of the interpreter: a large body is compressed off the loop.
            if len(body) > _COMPRESS_ON_LOOP:
                body = await asyncio.to_thread(gzip.compress, body, 1)
            else:
                body = gzip.compress(body, 1)
            headers["Content-Encoding"] = "gzip"
        # The body depends on Accept too (text, OpenMetrics, protobuf): a cache keys on both.
        headers["Vary"] = "Accept, Accept-Encoding"
        return Response(body, media_type=content_type, headers=headers)

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        # Liveness of the exporter itself: a database outage is reported by the metrics.
        return PlainTextResponse("ok\n")

    @app.get("/", response_class=HTMLResponse)
    async def landing() -> str:
        return landing_page(live.current.coordinator, telemetry_path)

    return app
