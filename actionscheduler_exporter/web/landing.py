"""The landing page: links to the metrics and the health check, and the configured sites
(names and table prefixes only: nothing about the database)."""

from __future__ import annotations

import html

from actionscheduler_exporter import __version__
from actionscheduler_exporter.scrape.coordinator import Coordinator


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
