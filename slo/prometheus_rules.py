"""The objectives as Prometheus recording and alerting rules, pre-rendered.

Per scope and SLI: the error ratio over every window of the multiwindow alerts
(`slo:actionscheduler_sli_errors:ratio_rate<window>`), then the page and ticket alerts.
A second group, evaluated every 5 minutes, records the error ratio over the objective's
whole window, the objective itself and the share of the error budget left.
"""

from __future__ import annotations

from typing import Any

from slo import queries
from slo.objectives import Objectives, Scope
from slo.windows import BURN_WINDOWS, RECORDED_WINDOWS, SEVERITY, BurnWindow

ERRORS = "slo:actionscheduler_sli_errors:ratio_rate"
OBJECTIVE = "slo:actionscheduler_sli_objective:ratio"
BUDGET_REMAINING = "slo:actionscheduler_error_budget_remaining:ratio"
RUNBOOK_BASE = (
    "https://github.com/actionscheduler-exporter/actionscheduler-exporter/blob/main/docs/runbooks/"
)
DASHBOARD = "d/actionscheduler-slo?var-site={{ $labels.site }}&var-slo={{ $labels.slo }}"
_WORDS = {"1h": "hour", "6h": "six hours", "1d": "day", "3d": "three days"}
_SUMMARY = {
    queries.START_ON_TIME: "Runs of {{ $labels.site }} start late:",
    queries.SUCCESS: "Runs of {{ $labels.site }} fail:",
}
_WHAT = {
    queries.START_ON_TIME: "started more than {within:g} s after they were due",
    queries.SUCCESS: "failed",
}


def document(objectives: Objectives, *, native: bool = False) -> dict[str, Any]:
    """`native`: the start delay read as a native histogram (rules/native/)."""
    fast: list[dict[str, Any]] = []
    slow: list[dict[str, Any]] = []
    for scope in objectives.scopes:
        for name in queries.SLIS:
            fast += _windows(objectives, scope, name, native)
            fast += _alerts(objectives, scope, name, native)
            slow += _objective_window(objectives, scope, name, native)
    return {
        "groups": [
            {"name": "actionscheduler-slo", "rules": fast},
            {"name": "actionscheduler-slo-window", "interval": "5m", "rules": slow},
        ]
    }


def recorded_selector(scope: Scope, name: str) -> str:
    """The scope's series among those the SLO rules record."""
    return f'{{slo="{queries.slo_name(scope, name)}"}}'


def _labels(scope: Scope, name: str) -> dict[str, str]:
    """Every series and alert of an objective: which objective (unique per scope) and SLI."""
    return {"slo": queries.slo_name(scope, name), "sli": name}


def _ratio(sli: queries.Sli, window: str) -> str:
    return f"{queries.at(sli.errors, window)}\n/\n{queries.at(sli.total, window)}"


def _windows(objectives: Objectives, scope: Scope, name: str, native: bool) -> list[dict[str, Any]]:
    sli = queries.sli(objectives, scope, name, native=native)
    return [
        {"record": f"{ERRORS}{window}", "expr": _ratio(sli, window), "labels": _labels(scope, name)}
        for window in RECORDED_WINDOWS
    ]


def _budget(scope: Scope, name: str) -> float:
    return round(1 - queries.objective_of(scope, name) / 100, 12)


def threshold(objectives: Objectives, scope: Scope, name: str, burn_window: BurnWindow) -> str:
    return f"({burn_window.burn_rate(objectives.window_days):g} * {_budget(scope, name):g})"


def runs_needed(objectives: Objectives, scope: Scope, name: str, burn_window: BurnWindow) -> int:
    """The low-traffic guard of one condition: a function of the objective and the window."""
    return burn_window.runs_needed(
        objectives.window_days, _budget(scope, name), objectives.minimum_runs
    )


def _alerts(objectives: Objectives, scope: Scope, name: str, native: bool) -> list[dict[str, Any]]:
    sli = queries.sli(objectives, scope, name, native=native)
    chosen = queries.selection(objectives, scope)
    recorded = recorded_selector(scope, name)
    rules = []
    for severity in ("page", "ticket"):
        conditions = []
        windows = [w for w in BURN_WINDOWS if w.severity == severity]
        for window in windows:
            limit = threshold(objectives, scope, name, window)
            runs = (
                queries.at(sli.runs, window.long)
                if sli.runs
                else f"sum by ({chosen.by}) (increase({sli.total_counter}[{window.long}]))"
            )
            conditions.append(
                "(\n"
                f"  {ERRORS}{window.long}{recorded} > {limit}\n"
                f"  and {ERRORS}{window.short}{recorded} > {limit}\n"
                f"  and on ({chosen.by}) {runs}"
                f" >= {runs_needed(objectives, scope, name, window)}\n"
                ")"
            )
        first, second = windows
        rates = (
            f"{first.burn_rate(objectives.window_days):g} times as fast as allowed over the"
            f" last {_WORDS[first.long]}, or {second.burn_rate(objectives.window_days):g} times"
            f" over the last {_WORDS[second.long]}"
        )
        what = _WHAT[name].format(within=scope.start_on_time.within_seconds or 0)
        group = " (group {{ $labels.group }})" if scope.kind == "group" else ""
        objective = queries.objective_of(scope, name)
        rules.append(
            {
                "alert": queries.ALERT_NAMES[name],
                "expr": "\nor\n".join(conditions) + "\n",
                "labels": {"severity": SEVERITY[severity], **_labels(scope, name)},
                "annotations": {
                    "summary": f"{_SUMMARY[name]} the {name} error budget burns"
                    f" {'fast' if severity == 'page' else 'steadily'}.",
                    "description": (
                        "{{ $value | humanizePercentage }} of the runs of site"
                        f" {{{{ $labels.site }}}}{group} {what} over the alert's window; the"
                        f" objective ({queries.promise(scope, name)}, over {objectives.window})"
                        f" allows {100 - objective:g} %. The error budget burns at least {rates}."
                    ),
                    "runbook_url": RUNBOOK_BASE + queries.RUNBOOKS[name],
                    "dashboard": DASHBOARD,
                },
            }
        )
    return rules


def _objective_window(
    objectives: Objectives, scope: Scope, name: str, native: bool
) -> list[dict[str, Any]]:
    sli = queries.sli(objectives, scope, name, native=native)
    window = objectives.window
    recorded = recorded_selector(scope, name)
    objective = queries.objective_of(scope, name) / 100
    budget = round(1 - objective, 12)
    return [
        {
            "record": f"{ERRORS}{window}",
            "expr": _ratio(sli, window),
            "labels": _labels(scope, name),
        },
        {
            "record": OBJECTIVE,
            "expr": f"0 * {queries.at(sli.total, window)} + {objective:g}",
            "labels": _labels(scope, name),
        },
        {
            "record": BUDGET_REMAINING,
            "expr": f"1 - {ERRORS}{window}{recorded} / {budget:g}",
            "labels": _labels(scope, name),
        },
    ]
