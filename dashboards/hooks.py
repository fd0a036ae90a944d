"""The drill-down: which hooks and groups are behind the backlog and the failures."""

from __future__ import annotations

import dataclasses

from dashboards.grafana import (
    SITE,
    Json,
    Panel,
    Query,
    dashboard,
    dashboard_link,
    site_variables,
    variable_query,
)
from rules.native import native_expression

UID = "actionscheduler-hooks"
HOOK = 'hook=~"$hook"'
GROUP = 'group=~"$group"'


def panels() -> list[Panel]:
    return [
        Panel(
            "Pending actions by group",
            "timeseries",
            "Pending actions per group (due and future), the top groups by size; the rest "
            'are summed as "other". A group that grows alone points at its plugin.',
            [
                Query(
                    f"sum by (site, group) (actionscheduler_actions_by_group{{{SITE}, {GROUP},"
                    ' status="pending"})',
                    "{{site}} {{group}}",
                )
            ],
            width=12,
            runbook="backlog-not-draining.md",
        ),
        Panel(
            "Due backlog by group",
            "timeseries",
            "Due actions per group (claimed or not), from the oldest due_split_rows due "
            "actions: the backlog a dedicated pool of that group scales on. Beyond the cap, "
            "the rest is counted as unsplit.",
            [
                Query(
                    "sum by (site, group) (actionscheduler_due_actions_by_group"
                    f"{{{SITE}, {GROUP}}})",
                    "{{site}} {{group}}",
                ),
                Query(
                    f"sum by (site) (actionscheduler_due_actions_unsplit{{{SITE}}}) > 0",
                    "{{site}} unsplit",
                    may_be_empty="only while the backlog exceeds due_split_rows",
                ),
            ],
            runbook="group-oldest-due-action-late.md",
        ),
        Panel(
            "Oldest due action by group",
            "timeseries",
            "How long each group's oldest due action has waited, next to the thresholds of "
            "groups that have their own (groups: in the site's config). A group that grows "
            "old alone while others drain needs runners of its own (worker pools).",
            [
                Query(
                    "max by (site, group) (actionscheduler_oldest_due_action_age_seconds_by_group"
                    f"{{{SITE}, {GROUP}}})",
                    "{{site}} {{group}}",
                ),
                Query(
                    "max by (site, group) ("
                    "actionscheduler_alert_threshold_group_oldest_due_warning_seconds"
                    f"{{{SITE}, {GROUP}}})",
                    "{{site}} {{group}} warning",
                    may_be_empty="only for groups with thresholds of their own",
                ),
            ],
            unit="s",
            runbook="group-oldest-due-action-late.md",
        ),
        Panel(
            "Due backlog by hook",
            "timeseries",
            "Due actions per hook, the top hooks and those named in the site's hooks: "
            '(a pool with --hooks scales on them); the rest are summed as "other".',
            [
                Query(
                    f"sum by (site, hook) (actionscheduler_due_actions_by_hook{{{SITE}, {HOOK}}})",
                    "{{site}} {{hook}}",
                )
            ],
        ),
        Panel(
            "Oldest due action by hook",
            "timeseries",
            "How long each hook's oldest due action has waited: a hook that grows old while "
            "the others run is starved (or its pool, with --hooks, is too small).",
            [
                Query(
                    "max by (site, hook) (actionscheduler_oldest_due_action_age_seconds_by_hook"
                    f"{{{SITE}, {HOOK}}})",
                    "{{site}} {{hook}}",
                )
            ],
            unit="s",
        ),
        Panel(
            "Completions by hook",
            "timeseries",
            "Runs completed per second, per hook. A hook that drops to zero while its "
            "actions pile up in the backlog has stopped running.",
            [
                Query(
                    f"sum by (site, hook) (rate(actionscheduler_actions_completed_total"
                    f"{{{SITE}, {HOOK}, {GROUP}}}[$__rate_interval]))",
                    "{{site}} {{hook}}",
                )
            ],
            unit="ops",
            width=12,
        ),
        Panel(
            "Failures by hook and reason",
            "timeseries",
            "Runs failed per second, per hook and reason: exception, timeout (worker died), "
            "fatal (PHP fatal error), no_callback (no code for the hook), unknown.",
            [
                Query(
                    f"sum by (site, hook, reason) (rate(actionscheduler_actions_failed_total"
                    f"{{{SITE}, {HOOK}, {GROUP}}}[$__rate_interval]))",
                    "{{site}} {{hook}} {{reason}}",
                )
            ],
            unit="ops",
            width=12,
            runbook="hook-failure-ratio.md",
            thresholds=[(None, "green"), (0.1, "red")],
        ),
        Panel(
            "Top failing hooks (15m)",
            "table",
            "The ten hooks with most failures per second over 15 minutes, and their "
            "failure ratio. Compare with the failed actions each hook has kept.",
            [
                Query(
                    "topk(10, site_hook:actionscheduler_actions_failed:rate15m"
                    f"{{{SITE}, {HOOK}}} > 0)",
                    instant=True,
                    may_be_empty="no hook fails on a healthy store",
                ),
                Query(
                    f"site_hook:actionscheduler_actions_failed:ratio_rate15m{{{SITE}, {HOOK}}} > 0",
                    instant=True,
                    may_be_empty="no hook fails on a healthy store",
                ),
            ],
            unit="short",
            width=12,
            runbook="hook-failure-ratio.md",
        ),
        Panel(
            "Run duration",
            "heatmap",
            "How long runs take, per second of time, for the selected hooks. Log dates "
            "have one-second resolution: the lowest bucket means under a second.",
            [
                Query(
                    f"sum by (le) (rate(actionscheduler_action_run_duration_seconds_bucket"
                    f"{{{SITE}, {HOOK}}}[$__rate_interval]))",
                    "{{le}}",
                    heatmap=True,
                )
            ],
            unit="s",
            width=12,
            options=_heatmap("Oranges"),
        ),
        Panel(
            "Start delay",
            "heatmap",
            "How late runs start after their scheduled time, for the selected groups. The "
            "lowest bucket means on time.",
            [
                Query(
                    f"sum by (le) (rate(actionscheduler_action_start_delay_seconds_bucket"
                    f"{{{SITE}, {GROUP}}}[$__rate_interval]))",
                    "{{le}}",
                    heatmap=True,
                )
            ],
            unit="s",
            width=12,
            runbook="oldest-due-action-late.md",
            options=_heatmap("Blues"),
        ),
        Panel(
            "Failed actions kept, by hook",
            "timeseries",
            "Failed actions in the table per hook (Action Scheduler 3.x keeps them for "
            "good). A step up is a batch of failures; read their log messages.",
            [Query(f"actionscheduler_failed_actions{{{SITE}, {HOOK}}}", "{{site}} {{hook}}")],
            width=12,
            runbook="hook-failure-ratio.md",
        ),
        Panel(
            "Recurring hooks stopped",
            "table",
            "Recurring hooks with no next occurrence: the latest action failed and nothing "
            "is pending (Action Scheduler stopped rescheduling it, or its run was killed). "
            "The job will not run again until it is scheduled again; see the runbook.",
            [
                Query(
                    "max by (site, hook) (actionscheduler_recurring_hooks_stopped"
                    f"{{{SITE}, {HOOK}}})",
                    "{{site}} {{hook}}",
                    instant=True,
                )
            ],
            width=12,
            runbook="recurring-action-stopped.md",
        ),
        Panel(
            "Recurring actions not rescheduled",
            "timeseries",
            "Stops Action Scheduler logged per hour, per hook and reason: "
            "consistently_failing (the hook's last runs all failed), next_instance_failed, "
            "unknown (a translated site).",
            [
                Query(
                    "sum by (site, hook, reason) (increase("
                    f"actionscheduler_recurring_actions_stopped_total{{{SITE}, {HOOK}}}[1h])) > 0",
                    "{{site}} {{hook}} {{reason}}",
                )
            ],
            width=12,
            runbook="recurring-action-stopped.md",
        ),
        Panel(
            "Actions created by hook",
            "timeseries",
            "New actions per second per hook: where the load comes from. A flood from one "
            "hook explains a growing backlog.",
            [
                Query(
                    f"sum by (site, hook) (rate(actionscheduler_actions_created_total"
                    f"{{{SITE}, {HOOK}, {GROUP}}}[$__rate_interval]))",
                    "{{site}} {{hook}}",
                )
            ],
            unit="ops",
            width=12,
            runbook="backlog-not-draining.md",
        ),
    ]


def native_panels() -> list[Panel]:
    """The same panels on native histograms (the latency heatmaps read one series per
    histogram), and the start delay by hook, which only native histograms have."""
    out = [
        dataclasses.replace(
            panel,
            queries=[
                dataclasses.replace(query, expr=native_expression(query.expr))
                for query in panel.queries
            ],
        )
        for panel in panels()
    ]
    by_hook = Panel(
        "Start delay by hook",
        "heatmap",
        "How late runs start after their scheduled time, for the selected hooks (a native "
        "histogram: docs/native-histograms.md). The lowest bucket means on time.",
        [
            Query(
                "sum(rate(actionscheduler_action_start_delay_by_hook_seconds"
                f"{{{SITE}, {HOOK}}}[$__rate_interval]))",
                "{{le}}",
                heatmap=True,
            )
        ],
        unit="s",
        width=12,
        runbook="oldest-due-action-late.md",
        options=_heatmap("Blues"),
    )
    start_delay = next(i for i, panel in enumerate(out) if panel.title == "Start delay")
    out.insert(start_delay + 1, by_hook)
    return out


def build(native: bool = False) -> Json:
    """`native`: the form for native histograms (dashboards/native/), same uid and links."""
    return dashboard(
        UID,
        "Action Scheduler / Hooks and groups",
        "Backlog, throughput, failures and latency per hook and group. "
        "From actionscheduler-exporter.",
        [
            *site_variables(),
            variable_query(
                "hook",
                "Hook",
                f"label_values(actionscheduler_actions_started_total{{{SITE}}}, hook)",
            ),
            variable_query(
                "group",
                "Group",
                f"label_values(actionscheduler_actions_by_group{{{SITE}}}, group)",
            ),
        ],
        native_panels() if native else panels(),
        [dashboard_link("Overview", "actionscheduler-overview")],
    )


def _heatmap(scheme: str) -> dict[str, object]:
    """A heatmap of seconds in one colour scheme, from buckets Prometheus already keeps."""
    return {
        "calculate": False,
        "yAxis": {"unit": "s"},
        "color": {"scheme": scheme, "mode": "scheme"},
    }
