"""Small builders for Grafana dashboard JSON (schema version 39, Grafana 11 and later).

Plain data structures, no dashboard library: what a panel is stays visible in the
source, and a test compares the generated JSON with the committed files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# The data source the import dialog asks for: Grafana's import replaces `${DS_PROMETHEUS}`
# with the chosen one, which thereby becomes the default of the `datasource` variable.
DATASOURCE_INPUT = "DS_PROMETHEUS"
RUNBOOKS = (
    "https://github.com/actionscheduler-exporter/actionscheduler-exporter/blob/main/docs/runbooks/"
)
GRID_WIDTH = 24

Json = dict[str, Any]


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    # Why the query may return nothing on a healthy store (kube-state-metrics not
    # installed, no alert firing...). The dashboard test accepts empty results only here.
    may_be_empty: str = ""
    instant: bool = False
    heatmap: bool = False


@dataclass
class Panel:
    title: str
    kind: str  # stat, timeseries, heatmap, table
    description: str
    queries: list[Query]
    unit: str = "short"
    width: int = 8
    height: int = 8
    thresholds: list[tuple[float | None, str]] = field(default_factory=lambda: [(None, "green")])
    runbook: str = ""  # page under docs/runbooks/
    options: Json = field(default_factory=dict)
    overrides: list[Json] = field(default_factory=list)
    mappings: list[Json] = field(default_factory=list)
    repeat: str = ""  # a variable: one copy of the panel per selected value


def variable_datasource() -> Json:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {
            "selected": False,
            "text": f"${{{DATASOURCE_INPUT}}}",
            "value": f"${{{DATASOURCE_INPUT}}}",
        },
        "hide": 0,
        "refresh": 1,
    }


def variable_query(name: str, label: str, query: str) -> Json:
    """A multi-select variable with All, fed by label_values()."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-values"},
        "definition": query,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "refresh": 2,
        "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "hide": 0,
    }


# Every selector of the exporter's series: the cluster (kube-prometheus setups with several
# clusters label their series `cluster`; All is `.*`, which also matches series without
# the label) and the sites.
CLUSTER = 'cluster=~"$cluster"'
SITE = f'{CLUSTER}, site=~"$site"'


def dashboard_link(title: str, uid: str) -> Json:
    """A link to another dashboard of the bundle that keeps the selected sites."""
    return {
        "title": title,
        "url": f"/d/{uid}?${{cluster:queryparam}}&${{site:queryparam}}",
        "type": "link",
        "icon": "dashboard",
    }


def site_variables() -> list[Json]:
    """The variables every dashboard starts with: data source, cluster, site, namespace."""
    return [
        variable_datasource(),
        variable_query("cluster", "Cluster", "label_values(actionscheduler_up, cluster)"),
        variable_query("site", "Site", f"label_values(actionscheduler_up{{{CLUSTER}}}, site)"),
        variable_query(
            "namespace",
            "Namespace",
            # The workers' namespace (the exporter's own may differ: the Prometheus
            # Operator's `namespace` label on the exporter's series is its own).
            f"label_values(actionscheduler_worker_info{{{SITE}}}, worker_namespace)",
        ),
    ]


def alert_annotation() -> Json:
    return {
        "name": "Action Scheduler alerts",
        "enable": True,
        "iconColor": "red",
        "datasource": DATASOURCE,
        "expr": f'ALERTS{{alertname=~"ActionScheduler.*", alertstate="firing", {SITE}}}',
        "step": "60s",
        "titleFormat": "{{alertname}}",
        "textFormat": "{{site}} {{hook}}",
        "tagKeys": "severity,site",
        "useValueForTime": False,
    }


def dashboard(
    uid: str,
    title: str,
    description: str,
    variables: list[Json],
    panels: list[Panel],
    links: list[Json],
) -> Json:
    built = _layout(panels)
    return {
        # What grafana.com's import dialog reads: the data source to ask for, and what the
        # dashboard needs. Every query still goes through the `datasource` variable.
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "description": "The Prometheus that scrapes the exporter and holds the "
                "recording rules of rules/actionscheduler.rules.yml",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
            *(
                {"type": "panel", "id": kind, "name": kind, "version": ""}
                for kind in sorted({panel["type"] for panel in built})
            ),
        ],
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["actionscheduler", "woocommerce"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "timezone": "browser",
        "templating": {"list": variables},
        "annotations": {"list": [alert_annotation()]},
        "links": links,
        "panels": built,
    }


def _layout(panels: list[Panel]) -> list[Json]:
    """Left to right, then down: panels never overlap."""
    built: list[Json] = []
    x = y = row_height = 0
    for panel_id, panel in enumerate(panels, start=1):
        if x + panel.width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        built.append(_panel(panel_id, panel, {"x": x, "y": y, "w": panel.width, "h": panel.height}))
        x += panel.width
        row_height = max(row_height, panel.height)
    return built


def _panel(panel_id: int, panel: Panel, grid: Json) -> Json:
    steps = [{"color": color, "value": value} for value, color in panel.thresholds]
    built: Json = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": grid,
        "fieldConfig": {
            "defaults": {
                "unit": panel.unit,
                "thresholds": {"mode": "absolute", "steps": steps},
                "mappings": panel.mappings,
                "color": {"mode": "thresholds" if panel.kind == "stat" else "palette-classic"},
            },
            "overrides": panel.overrides,
        },
        "options": panel.options,
        "targets": [_target(index, query) for index, query in enumerate(panel.queries)],
    }
    if panel.kind == "timeseries":
        built["fieldConfig"]["defaults"]["custom"] = {
            "thresholdsStyle": {"mode": "line" if len(steps) > 1 else "off"},
            "fillOpacity": 10,
            "lineWidth": 1,
            "showPoints": "never",
        }
    if panel.repeat:
        built.update({"repeat": panel.repeat, "repeatDirection": "h", "maxPerRow": 2})
    if panel.runbook:
        built["links"] = [
            {"title": "Runbook", "url": RUNBOOKS + panel.runbook, "targetBlank": True}
        ]
    return built


def _target(index: int, query: Query) -> Json:
    target: Json = {
        "refId": chr(ord("A") + index),
        "datasource": DATASOURCE,
        "expr": query.expr,
        "legendFormat": query.legend or "__auto",
        "range": not query.instant,
        "instant": query.instant,
    }
    if query.heatmap:
        target["format"] = "heatmap"
    if query.instant and not query.heatmap:
        target["format"] = "table"
    return target


def dashed(regex: str) -> Json:
    """An override: the series whose name matches are drawn dashed (thresholds)."""
    return {
        "matcher": {"id": "byRegexp", "options": regex},
        "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}],
    }


def colored(regex: str, color: str) -> Json:
    """An override: the series whose name matches get one colour."""
    return {
        "matcher": {"id": "byRegexp", "options": regex},
        "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": color}}],
    }
