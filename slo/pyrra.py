"""The objectives as Pyrra ServiceLevelObjective resources (pyrra.dev/v1alpha1).

Pyrra reads an indicator from metric selectors and writes the rules itself: start on time
is a latency indicator (the histogram's bucket at `withinSeconds` and its count), success
a ratio indicator (failed runs of `actionscheduler_actions_finished_total`, out of all).
"""

from __future__ import annotations

from typing import Any

from slo import queries
from slo.objectives import Objectives, Scope


def resource(objectives: Objectives, scope: Scope, name: str) -> dict[str, Any]:
    sli = queries.sli(objectives, scope, name)
    grouping = list(queries.selection(objectives, scope).grouping)
    if name == queries.START_ON_TIME:
        indicator = {
            "latency": {
                "success": {"metric": sli.good_selector},
                "total": {"metric": sli.total_counter},
                "grouping": grouping,
            }
        }
    else:
        indicator = {
            "ratio": {
                "errors": {"metric": sli.error_selector},
                "total": {"metric": sli.total_counter},
                "grouping": grouping,
            }
        }
    return {
        "apiVersion": "pyrra.dev/v1alpha1",
        "kind": "ServiceLevelObjective",
        "metadata": {"name": f"actionscheduler-{queries.slo_name(scope, name)}"},
        "spec": {
            "description": queries.description(scope, name),
            "target": f"{queries.objective_of(scope, name):g}",
            "window": objectives.window,
            "indicator": indicator,
            "alerting": {
                "name": queries.ALERT_NAMES[name],
                "absent": False,
                "severities": {
                    "fastBurn": "critical",
                    "mediumBurn": "critical",
                    "slowBurn": "warning",
                    "longTermBurn": "warning",
                },
            },
        },
    }


def resources(objectives: Objectives) -> list[dict[str, Any]]:
    return [
        resource(objectives, scope, name) for scope in objectives.scopes for name in queries.SLIS
    ]
