"""The objectives as OpenSLO v1 documents: a Service and one SLO per scope and SLI.

Ratio metrics over counters (`counter: true`): the tool that reads them takes their
increase over the window. Start on time counts good runs (the histogram's bucket at
`withinSeconds`), success bad ones (failed runs).
"""

from __future__ import annotations

from typing import Any

from slo import queries
from slo.objectives import Objectives, Scope

SERVICE = "actionscheduler"


def _source(query: str) -> dict[str, Any]:
    return {"metricSource": {"type": "Prometheus", "spec": {"query": query}}}


def slo(objectives: Objectives, scope: Scope, name: str) -> dict[str, Any]:
    sli = queries.sli(objectives, scope, name)
    by = queries.selection(objectives, scope).by
    total = _source(f"sum by ({by}) ({sli.total_counter})")
    if name == queries.START_ON_TIME:
        ratio = {"counter": True, "good": _source(f"sum by ({by}) ({sli.good_selector})")}
    else:
        ratio = {"counter": True, "bad": _source(f"sum by ({by}) ({sli.error_selector})")}
    ratio["total"] = total
    slug = queries.slo_name(scope, name)
    return {
        "apiVersion": "openslo/v1",
        "kind": "SLO",
        "metadata": {"name": f"actionscheduler-{slug}", "displayName": f"Action Scheduler {slug}"},
        "spec": {
            "description": queries.description(scope, name),
            "service": SERVICE,
            "indicator": {
                "metadata": {"name": f"actionscheduler-{slug}-sli"},
                "spec": {"ratioMetric": ratio},
            },
            "timeWindow": [{"duration": objectives.window, "isRolling": True}],
            "budgetingMethod": "Occurrences",
            "objectives": [
                {
                    "displayName": queries.ALERT_NAMES[name],
                    "target": round(queries.objective_of(scope, name) / 100, 12),
                }
            ],
        },
    }


def documents(objectives: Objectives) -> list[dict[str, Any]]:
    service = {
        "apiVersion": "openslo/v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "displayName": "Action Scheduler queues"},
        "spec": {"description": "WordPress' Action Scheduler job queues, per site."},
    }
    return [
        service,
        *(slo(objectives, scope, name) for scope in objectives.scopes for name in queries.SLIS),
    ]
