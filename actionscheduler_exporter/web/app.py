"""The HTTP face of the exporter: /metrics, /healthz and a landing page."""

from __future__ import annotations

import asyncio
import gzip
import html
from dataclasses import dataclass

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actionscheduler_exporter import __version__
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.scrape.budget import BudgetError, ScrapeBudget
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.web.auth import BasicAuth
from actionscheduler_exporter.web.webconfig import WebConfig

SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"


@dataclass(frozen=True)
class Serving:
    """What the app serves with: replaced as a whole when the configuration is reloaded
    (SIGHUP), and taken once at the start of each request."""

    coordinator: Coordinator
    auth: BasicAuth
    headers: list[tuple[bytes, bytes]]

    @classmethod
    def of(cls, coordinator: Coordinator, web: WebConfig) -> Serving:
        headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in web.headers.items()
        ]
        return cls(coordinator, BasicAuth(web.users), headers)


class Live:
    """The current `Serving`, shared by the app and its middleware."""

    def __init__(self, serving: Serving) -> None:
        self.current = serving


def create_app(
    coordinator: Coordinator,
    web: WebConfig | None = None,
    live: Live | None = None,
    *,
    telemetry_path: str = "/metrics",
) -> FastAPI:
    """`live`: a holder whose `Serving` a reload replaces (the server's); by default one
    of the app's own, serving `coordinator` and `web` for good."""
    app = FastAPI(
        title="actionscheduler-exporter",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    live = live or Live(Serving.of(coordinator, web or WebConfig()))
    app.state.live = live
    app.add_middleware(Protect, live=live)

    @app.api_route(telemetry_path, methods=["GET", "HEAD"])
    async def metrics(request: Request) -> Response:
        try:
            budget = ScrapeBudget.from_header(request.headers.get(SCRAPE_TIMEOUT_HEADER))
        except BudgetError as error:
            return PlainTextResponse(f"{SCRAPE_TIMEOUT_HEADER} {error}\n", status_code=400)
        # The scrape protocol of `Coordinator.scrape`, with an awaitable wait: joining may
        # wait for a first listing of databases, and the results for the Kubernetes API,
        # so both run off the event loop.
        coordinator = live.current.coordinator  # a reload may replace it meanwhile
        pending = await asyncio.to_thread(coordinator.begin, budget)
        await pending.settled()
        results = await asyncio.to_thread(pending.results)
        body, content_type = render(results, request.headers.get("accept"))
        headers = {}
        # Prometheus asks for gzip: a thousand sites' answer is megabytes of text, a tenth
        # of it compressed (the fastest level: the CPU is the scrape's, the bytes are not).
        if _accepts_gzip(request.headers.get("accept-encoding", "")):
            body = await asyncio.to_thread(gzip.compress, body, 1)
            headers["Content-Encoding"] = "gzip"
        headers["Vary"] = "Accept-Encoding"
        return Response(body, media_type=content_type, headers=headers)

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        # Liveness of the exporter itself: a database outage is reported by the metrics.
        return PlainTextResponse("ok\n")

    @app.get("/", response_class=HTMLResponse)
    async def landing() -> str:
        return landing_page(live.current.coordinator, telemetry_path)

    return app


class Protect:
    """Basic auth and the configured response headers, as a plain ASGI middleware (no
    per-request task group or stream, unlike Starlette's BaseHTTPMiddleware)."""

    def __init__(self, app: ASGIApp, live: Live) -> None:
        self.app = app
        self.live = live

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        serving = self.live.current
        # /healthz stays open for liveness probes: it tells nothing but "the process runs".
        if serving.auth.enabled and scope["path"] != "/healthz":
            header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            refusal = await self._refusal(serving.auth, header or None)
            if refusal is not None:
                await refusal(scope, receive, self._with_headers(serving.headers, send))
                return
        await self.app(scope, receive, self._with_headers(serving.headers, send))

    @staticmethod
    async def _refusal(auth: BasicAuth, authorization: str | None) -> Response | None:
        """None when the request may pass. A pair verified before is checked without a
        thread; others wait for bcrypt on the auth threads, or are told to come back
        later when too many checks wait already."""
        allowed = auth.remembered(authorization)
        if allowed is None:
            check = auth.check(authorization)
            if check is None:
                return PlainTextResponse(
                    "Too many authentication attempts\n", status_code=429,
                    headers={"Retry-After": "1"},
                )  # fmt: skip
            allowed = await asyncio.wrap_future(check)
        if allowed:
            return None
        return PlainTextResponse(
            "Unauthorized\n",
            status_code=401,
            headers={"WWW-Authenticate": 'Basic realm="actionscheduler-exporter"'},
        )

    @staticmethod
    def _with_headers(headers: list[tuple[bytes, bytes]], send: Send) -> Send:
        if not headers:
            return send

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        return send_with_headers


def _accepts_gzip(header: str) -> bool:
    """Whether an Accept-Encoding header takes gzip (and does not refuse it with q=0)."""
    for part in header.split(","):
        coding, _, parameters = part.strip().partition(";")
        if coding.strip().lower() in ("gzip", "*"):
            quality = parameters.replace(" ", "").lower()
            return quality not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def landing_page(coordinator: Coordinator, telemetry_path: str = "/metrics") -> str:
    rows = "".join(
        f"<tr><td>{html.escape(site.name)}</td><td>{html.escape(site.table_prefix)}</td></tr>"
        for site in coordinator.config.sites
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<title>Action Scheduler exporter</title></head><body>"
        f"<h1>Action Scheduler exporter {html.escape(__version__)}</h1>"
        f"<p><a href='{html.escape(telemetry_path.lstrip('/'))}'>Metrics</a> · "
        "<a href='healthz'>Health</a></p>"
        "<h2>Sites</h2><table border='1' cellpadding='4'>"
        "<tr><th>site</th><th>table prefix</th></tr>"
        f"{rows}</table></body></html>\n"
    )
