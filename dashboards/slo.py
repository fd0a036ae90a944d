"""Service level objectives: each objective's SLI against its target, the error budget
left over the window, and how fast it burns (the rules of rules/actionscheduler-slo.rules.yml)."""

from __future__ import annotations

from dashboards.grafana import (
    SITE,
    Json,
    Panel,
    Query,
    colored,
    dashboard,
    dashboard_link,
    dashed,
    site_variables,
    variable_query,
)

UID = "actionscheduler-slo"
SLO = 'slo=~"$slo"'
ERRORS = "slo:actionscheduler_sli_errors:ratio_rate"
OBJECTIVE = f"slo:actionscheduler_sli_objective:ratio{{{SITE}, {SLO}}}"
BUDGET = f"slo:actionscheduler_error_budget_remaining:ratio{{{SITE}, {SLO}}}"
# The burn-rate alerts' long windows; a burn rate of 1 spends the budget in exactly the window.
BURN_WINDOWS = ("1h", "6h", "1d", "3d")


def burn_rate(window: str) -> str:
    return f"{ERRORS}{window}{{{SITE}, {SLO}}} / (1 - {OBJECTIVE})"


def panels() -> list[Panel]:
    return [
        Panel(
            "Error budget left",
            "stat",
            "The share of the objective's error budget not spent over its window (28 days "
            "by default): 100 % untouched, 0 % spent, below 0 the objective is missed.",
            [Query(f"min by (site, slo) ({BUDGET})", "{{site}} {{slo}}", instant=True)],
            unit="percentunit",
            width=24,
            height=5,
            thresholds=[(None, "red"), (0, "orange"), (0.25, "green")],
            runbook="slo-start-on-time-budget-burn.md",
        ),
        Panel(
            "SLI against the objective (1h)",
            "timeseries",
            "The share of good runs over the last hour (started on time, or not failed), "
            "against the objective (dashed).",
            [
                Query(f"1 - {ERRORS}1h{{{SITE}, {SLO}}}", "{{site}} {{slo}}"),
                Query(OBJECTIVE, "{{site}} {{slo}} objective"),
            ],
            unit="percentunit",
            width=12,
            overrides=[dashed("/objective/")],
        ),
        Panel(
            "Error budget left over the window",
            "timeseries",
            "How the budget was spent: a cliff is a fast burn (the page), a slope a slow one "
            "(the ticket).",
            [Query(BUDGET, "{{site}} {{slo}}")],
            unit="percentunit",
            width=12,
            thresholds=[(None, "red"), (0, "green")],
        ),
        Panel(
            "Burn rates",
            "timeseries",
            "How fast the budget burns over each alert window: 1 spends it in exactly the "
            "objective's window. Pages fire when the 1h and 6h rates pass 13.44 and 5.6 (28 "
            "days), tickets when the 1d and 3d rates pass 2.8 and 0.93, each with its short "
            "window.",
            [
                Query(burn_rate(window), f"{{{{site}}}} {{{{slo}}}} {window}")
                for window in BURN_WINDOWS
            ],
            width=16,
            thresholds=[(None, "green"), (1, "red")],
            overrides=[colored("/ 1h$/", "red"), colored("/ 3d$/", "blue")],
            runbook="slo-start-on-time-budget-burn.md",
        ),
        Panel(
            "Firing SLO alerts",
            "table",
            "The burn-rate alerts firing now; their runbooks say what burning budget means "
            "for the shop and which threshold alerts tell why.",
            [
                Query(
                    'ALERTS{alertname=~"ActionScheduler.*BudgetBurn", alertstate="firing",'
                    f" {SITE}}}",
                    "{{alertname}} {{slo}} {{severity}}",
                    instant=True,
                    may_be_empty="no objective's error budget burns",
                )
            ],
            width=8,
            runbook="slo-success-budget-burn.md",
        ),
    ]


def variables() -> list[Json]:
    return [
        *site_variables(),
        variable_query(
            "slo",
            "Objective",
            f"label_values({ERRORS}5m{{{SITE}}}, slo)",
        ),
    ]


def build() -> Json:
    return dashboard(
        UID,
        "Action Scheduler / Service level objectives",
        "Start on time and success objectives per site and group: SLI, error budget and "
        "burn rates. From actionscheduler-exporter.",
        variables(),
        panels(),
        [
            dashboard_link("Overview", "actionscheduler-overview"),
            dashboard_link("Hooks and groups", "actionscheduler-hooks"),
        ],
    )
