"""The landing page: links to the metrics and the health check, and the configured sites
(names and table prefixes only: nothing about the database)."""

from __future__ import annotations

import html

from actionscheduler_exporter import __version__
from actionscheduler_exporter.scrape.coordinator import Coordinator


def landing_page(
    coordinator: Coordinator, telemetry_path: str = "/metrics", helped: int = 0
) -> str:
    """Every site as it is served: a `table_prefix: auto` network as its subsites, a
    `database: auto` entry as the databases found (or a note until some are); `helped`:
    the sites the helper processes read (`split`), counted."""
    served = [pair for site in coordinator.sites for pair in site.served_as()]
    for entry in coordinator.config.sites:
        if entry.discovers_databases and not any(
            label.startswith(f"{entry.name}:") for label, _ in served
        ):
            served.append((entry.name, "database: auto (no database found yet)"))
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td>{html.escape(prefix)}</td></tr>"
        for label, prefix in served
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<title>Action Scheduler exporter</title></head><body>"
        f"<h1>Action Scheduler exporter {html.escape(__version__)}</h1>"
        f"<p><a href='{html.escape(telemetry_path.lstrip('/'))}'>Metrics</a> · "
        "<a href='healthz'>Health</a></p>"
        "<h2>Sites</h2><table border='1' cellpadding='4'>"
        "<tr><th>site</th><th>table prefix</th></tr>"
        f"{rows}</table>{_helped(helped)}</body></html>\n"
    )


def _helped(sites: int) -> str:
    if not sites:
        return ""
    helpers = "the exporter's helper processes (<code>processes</code>)"
    return f"<p>and {sites} more sites, read by {helpers}</p>"
