"""The HTTP face of the exporter: /metrics (metrics_route.py), /healthz and a landing
page (landing.py), behind the auth and the configured headers (middleware.py)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, PlainTextResponse
from starlette.types import ASGIApp

from actionscheduler_exporter import __version__
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.web.landing import landing_page
from actionscheduler_exporter.web.metrics_route import MetricsRoute
from actionscheduler_exporter.web.middleware import AuthAndHeaders
from actionscheduler_exporter.web.serving import CurrentServing, ServedWith
from actionscheduler_exporter.web.webconfig import WebConfig


def create_app(
    coordinator: Coordinator,
    web: WebConfig | None = None,
    live: CurrentServing | None = None,
    *,
    telemetry_path: str = "/metrics",
) -> ASGIApp:
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

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        # Liveness of the exporter itself: a database outage is reported by the metrics.
        return PlainTextResponse("ok\n")

    @app.get("/", response_class=HTMLResponse)
    async def landing() -> str:
        serving = live.current
        return landing_page(serving.coordinator, telemetry_path, serving.helpers.sites_read())

    return AuthAndHeaders(MetricsRoute(app, live, telemetry_path), live)
