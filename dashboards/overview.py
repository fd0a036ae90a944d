"""The overview: is each site's queue healthy, and if not, where?"""

from __future__ import annotations

from dashboards.grafana import (
    RUNBOOKS,
    SITE,
    Json,
    Panel,
    Query,
    colored,
    dashboard,
    dashboard_link,
    dashed,
    site_variables,
)
from dashboards.queries import keda_query

UID = "actionscheduler-overview"
NAMESPACE = 'namespace=~"$namespace"'
NO_KSM = "needs kube-state-metrics and the site's workers: setting"
NO_SOURCE = "needs the exporter's Kubernetes source (the site's kubernetes: setting)"
RUNBOOK_INDEX = {
    "title": "Runbooks",
    "type": "link",
    "icon": "doc",
    "targetBlank": True,
    "url": RUNBOOKS + "README.md",
}
UP_MAPPING: Json = {
    "type": "value",
    "options": {
        "0": {"text": "DOWN", "color": "red", "index": 0},
        "1": {"text": "UP", "color": "green", "index": 1},
    },
}


def panels() -> list[Panel]:
    return [
        Panel(
            "Sites up",
            "stat",
            "1 when the exporter reads the site's Action Scheduler tables. DOWN: the "
            "database refuses the exporter or the tables are missing; see the runbook.",
            [Query(f"actionscheduler_up{{{SITE}}}", "{{site}}")],
            unit="none",
            width=6,
            height=5,
            thresholds=[(None, "red"), (1, "green")],
            mappings=[UP_MAPPING],
            runbook="site-down.md",
            options={
                "colorMode": "background",
                "graphMode": "none",
                "reduceOptions": {"calcs": ["lastNotNull"]},
            },
        ),
        Panel(
            "Due backlog",
            "stat",
            "Pending actions whose scheduled time has passed (claimed or not): the work "
            "waiting for runners, and what the workers are scaled on. Rising while "
            "throughput is flat means the workers cannot keep up.",
            [Query(f"site:actionscheduler_due_actions:sum{{{SITE}}}", "{{site}}")],
            unit="short",
            width=6,
            height=5,
            thresholds=[(None, "green"), (1000, "orange"), (10000, "red")],
            runbook="backlog-not-draining.md",
            options={"reduceOptions": {"calcs": ["lastNotNull"]}, "graphMode": "area"},
        ),
        Panel(
            "Oldest due action",
            "stat",
            "How long the oldest due action has waited since its scheduled time. Orange "
            "from 15 minutes, red from a day (Action Scheduler's own past-due mark); the "
            "alerts use each site's own thresholds.",
            [
                Query(
                    f"max by (site) (actionscheduler_oldest_due_action_age_seconds{{{SITE}}})",
                    "{{site}}",
                )
            ],
            unit="s",
            width=6,
            height=5,
            thresholds=[(None, "green"), (900, "orange"), (86400, "red")],
            runbook="oldest-due-action-late.md",
            options={"reduceOptions": {"calcs": ["lastNotNull"]}, "graphMode": "none"},
        ),
        Panel(
            "Failure ratio (15m)",
            "stat",
            "Share of runs that failed over 15 minutes, all hooks. Red: look at the hooks "
            "dashboard for which hook fails and why.",
            [
                Query(
                    f"sum by (site) (rate(actionscheduler_actions_failed_total{{{SITE}}}[15m]))"
                    f" / (sum by (site) (rate(actionscheduler_actions_failed_total{{{SITE}}}"
                    f"[15m])) + sum by (site) (rate(actionscheduler_actions_completed_total"
                    f"{{{SITE}}}[15m])))",
                    "{{site}}",
                )
            ],
            unit="percentunit",
            width=6,
            height=5,
            thresholds=[(None, "green"), (0.05, "orange"), (0.1, "red")],
            runbook="hook-failure-ratio.md",
            options={"reduceOptions": {"calcs": ["lastNotNull"]}, "graphMode": "none"},
        ),
        Panel(
            "Due backlog by site",
            "timeseries",
            "Due actions waiting (unclaimed) and in runners' batches (claimed). A backlog "
            "that grows while throughput stays flat will not drain by itself.",
            [
                Query(
                    f"sum by (site, claim) (actionscheduler_due_actions{{{SITE}}})",
                    "{{site}} {{claim}}",
                )
            ],
            width=12,
            runbook="backlog-not-draining.md",
        ),
        Panel(
            "Oldest due action against its thresholds",
            "timeseries",
            "The oldest due action's wait, next to the site's warning and critical "
            "thresholds (alerts.oldest_due_warning and oldest_due_critical). Crossing a "
            "line for 5 minutes raises the alert.",
            [
                Query(f"actionscheduler_oldest_due_action_age_seconds{{{SITE}}}", "{{site}} age"),
                Query(
                    f"actionscheduler_alert_threshold_oldest_due_warning_seconds{{{SITE}}}",
                    "{{site}} warning",
                ),
                Query(
                    f"actionscheduler_alert_threshold_oldest_due_critical_seconds{{{SITE}}}",
                    "{{site}} critical",
                ),
            ],
            unit="s",
            width=12,
            runbook="oldest-due-action-late.md",
            overrides=[dashed("/warning|critical/")],
        ),
        Panel(
            "Throughput",
            "timeseries",
            "Actions completed and failed per second. Zero completions while the backlog "
            "is above zero is a stalled queue.",
            [
                Query(
                    f"site:actionscheduler_actions_completed:rate5m{{{SITE}}}", "{{site}} completed"
                ),
                Query(f"site:actionscheduler_actions_failed:rate5m{{{SITE}}}", "{{site}} failed"),
            ],
            unit="ops",
            width=12,
            runbook="queue-stalled.md",
            overrides=[colored("/failed/", "red")],
        ),
        Panel(
            "Start delay",
            "timeseries",
            "How late actions start after their scheduled time (median, 95th and 99th "
            "percentile over 5 minutes). One-second resolution: values under a second "
            "mean on time. The number an SLO is written on.",
            [
                Query(
                    f"site:actionscheduler_action_start_delay_seconds:p50_rate5m{{{SITE}}}",
                    "{{site}} p50",
                ),
                Query(
                    f"site:actionscheduler_action_start_delay_seconds:p95_rate5m{{{SITE}}}",
                    "{{site}} p95",
                ),
                Query(
                    f"site:actionscheduler_action_start_delay_seconds:p99_rate5m{{{SITE}}}",
                    "{{site}} p99",
                ),
            ],
            unit="s",
            width=12,
            thresholds=[(None, "green"), (900, "orange")],
            runbook="oldest-due-action-late.md",
        ),
        Panel(
            "Running and stuck actions",
            "timeseries",
            "Actions in progress, and how long the oldest has run, against the failure "
            "period. An age above the line is a worker killed mid-batch or stuck; the "
            "cleaner will fail that action.",
            [
                Query(f"actionscheduler_in_progress_actions{{{SITE}}}", "{{site}} running"),
                Query(
                    f"actionscheduler_oldest_in_progress_action_age_seconds{{{SITE}}}",
                    "{{site}} oldest (s)",
                ),
                Query(
                    f"actionscheduler_timeout_period_seconds{{{SITE}}}",
                    "{{site}} failure period (s)",
                ),
            ],
            width=12,
            runbook="action-running-too-long.md",
            overrides=[dashed("/failure period/")],
        ),
        Panel(
            "Claims against the concurrent-batches limit",
            "timeseries",
            "Active claims, counted as the runner counts them, and the site's limit. At "
            'the limit further runners print "There are too many concurrent batches" '
            "and do nothing. Orphaned claims: batches whose worker died.",
            [
                Query(f"actionscheduler_active_claims{{{SITE}}}", "{{site}} active"),
                Query(
                    f"actionscheduler_concurrent_batches_limit{{{SITE}}}",
                    "{{site}} limit",
                    may_be_empty="only for sites with concurrent_batches_limit configured",
                ),
                Query(f"actionscheduler_orphaned_claims{{{SITE}}}", "{{site}} orphaned"),
                Query(
                    f"actionscheduler_stale_claimed_pending_actions{{{SITE}}}",
                    "{{site}} stale claimed actions",
                ),
            ],
            width=12,
            runbook="concurrent-batches-at-limit.md",
            overrides=[dashed("/limit/")],
        ),
        Panel(
            "Failures by reason",
            "timeseries",
            "Failures per second by reason: exception (the action threw), timeout (its "
            "worker died), fatal (PHP fatal error), no_callback (no code for the hook), "
            "unknown (translated site). Timeouts and no_callback each have a runbook.",
            [
                Query(
                    f"site_reason:actionscheduler_actions_failed:rate5m{{{SITE}}}",
                    "{{site}} {{reason}}",
                )
            ],
            unit="ops",
            width=12,
            runbook="timeout-failures.md",
        ),
        Panel(
            "Runs by runner",
            "timeseries",
            "Runs started per second by the runner that started them: wp_cli (the "
            "dedicated workers), wp_cron and async_request (web requests), "
            "admin_list_table (someone pressed Run in the admin), other (a plugin's own). "
            "On a site with dedicated workers, anything but wp_cli and admin_list_table "
            "means the must-use plugin is not loaded somewhere.",
            [
                Query(
                    "sum by (site, runner) (rate(actionscheduler_actions_started_by_runner_total"
                    f"{{{SITE}}}[$__rate_interval]))",
                    "{{site}} {{runner}}",
                )
            ],
            unit="ops",
            width=12,
            runbook="queue-run-by-web-requests.md",
            overrides=[colored("/wp_cron|async_request/", "red")],
        ),
        Panel(
            "Worker restarts",
            "timeseries",
            "Restarts of the site's worker container in 15 minutes, from the exporter's "
            "Kubernetes source or from kube-state-metrics (joined through the workers: "
            "setting). OOMKilled workers leave orphaned claims and timeout failures behind.",
            [
                Query(
                    "sum by (site, namespace, deployment) ("
                    "label_replace(increase(kube_pod_container_status_restarts_total[15m]),"
                    ' "deployment", "$1", "pod", "(.+)-[a-z0-9]+-[a-z0-9]+")'
                    " * on (namespace, deployment, container) group_left (site)"
                    " max by (namespace, deployment, container, site)"
                    f" (site_workload:actionscheduler_worker_info:max{{{SITE}, {NAMESPACE}}}))",
                    "{{site}} {{deployment}}",
                    may_be_empty=NO_KSM,
                ),
                Query(
                    "sum by (site) (increase(actionscheduler_worker_container_restarts_total"
                    f"{{{SITE}}}[15m]))",
                    "{{site}} (exporter)",
                    may_be_empty=NO_SOURCE,
                ),
            ],
            width=12,
            runbook="worker-restarts.md",
            thresholds=[(None, "green"), (3, "red")],
        ),
        Panel(
            "Workers: replicas and the scaling signal ($site)",
            "timeseries",
            "The workers' autoscaler (current, desired and maximum replicas, from "
            "kube-state-metrics or the exporter's Kubernetes source) next to the scaling "
            "signal, from the very query the Helm "
            "chart gives KEDA: due plus in-progress actions. KEDA wants signal ÷ threshold "
            "workers, between its minimum and maximum.",
            [
                Query(keda_query("$site"), "KEDA signal (actions)"),
                *[
                    Query(
                        f"max by (horizontalpodautoscaler) (kube_horizontalpodautoscaler_{name}"
                        " * on (namespace, horizontalpodautoscaler) group_left (site)"
                        " max by (namespace, horizontalpodautoscaler, site)"
                        " (site_workload:actionscheduler_worker_info:max"
                        f'{{site="$site", {NAMESPACE}}}))',
                        f"{label} replicas",
                        may_be_empty=NO_KSM,
                    )
                    for name, label in (
                        ("status_current_replicas", "current"),
                        ("status_desired_replicas", "desired"),
                        ("spec_max_replicas", "maximum"),
                    )
                ],
                Query(
                    'actionscheduler_worker_autoscaler_replicas{site="$site"}',
                    "{{state}} replicas (exporter)",
                    may_be_empty=NO_SOURCE,
                ),
            ],
            width=12,
            runbook="workers-at-max-replicas.md",
            repeat="site",
        ),
        Panel(
            "Worker pools: each pool's signal and replicas ($site)",
            "timeseries",
            "With the chart's worker.pools, each pool is a Deployment scaled by a "
            "ScaledObject of its own on its own backlog: the value KEDA reads for each "
            "pool, and the pool's replicas. A pool whose signal grows while it runs at its "
            "maximum needs a higher maxReplicaCount (and concurrentBatches).",
            [
                Query(
                    "max by (scaledObject) (keda_scaler_metrics_value"
                    " * on (namespace, scaledObject) group_left (site)"
                    " max by (namespace, scaledObject, site) (label_replace("
                    f'site_workload:actionscheduler_worker_info:max{{site="$site", {NAMESPACE}}},'
                    ' "scaledObject", "$1", "deployment", "(.+)")))',
                    "{{scaledObject}} signal",
                    may_be_empty="needs KEDA's operator metrics and the chart's workers",
                ),
                Query(
                    "max by (deployment) (kube_deployment_status_replicas"
                    " * on (namespace, deployment) group_left (site)"
                    " max by (namespace, deployment, site) (site_workload:"
                    f'actionscheduler_worker_info:max{{site="$site", {NAMESPACE}}}))',
                    "{{deployment}} replicas",
                    may_be_empty=NO_KSM,
                ),
            ],
            width=12,
            runbook="group-oldest-due-action-late.md",
            repeat="site",
        ),
        Panel(
            "Worker pools: what each runs",
            "table",
            "Each pool of dedicated runners (the chart's worker.pools): its Deployment and "
            "the groups or hooks it runs. A group that no pool runs, or that two pools run, "
            "is a configuration mistake.",
            [
                Query(
                    "max by (site, deployment, runs) (actionscheduler_worker_info"
                    f'{{{SITE}, runs!=""}})',
                    instant=True,
                    may_be_empty="without worker pools (runs: in the site's workers:)",
                )
            ],
            unit="none",
            width=12,
        ),
        Panel(
            "Firing Action Scheduler alerts",
            "table",
            "Alerts of this bundle that fire now, per site. Empty when all is well.",
            [
                Query(
                    f'ALERTS{{alertname=~"ActionScheduler.*", alertstate="firing", {SITE}}}',
                    instant=True,
                    may_be_empty="no alert fires on a healthy store",
                )
            ],
            unit="none",
            width=12,
        ),
        Panel(
            "Table sizes",
            "timeseries",
            "Size of the four tables from the server's statistics. A log table that only "
            "grows means the cleaner's purge has stopped.",
            [Query(f"actionscheduler_table_size_bytes{{{SITE}}}", "{{site}} {{table}}")],
            unit="bytes",
            width=12,
        ),
        Panel(
            "Exporter",
            "timeseries",
            "How long each site's round of queries takes, how old the heavy tier's totals "
            "are (refreshed in the background every heavy_interval), collectors that "
            "failed in the last scrape (0 is good), and log rows deleted before the exporter "
            "read them in the last hour (their events are missing from the counters). "
            "Failing collectors name their error in the exporter's log.",
            [
                Query(
                    f"actionscheduler_exporter_scrape_duration_seconds{{{SITE}}}",
                    "{{site}} scrape (s)",
                ),
                Query(
                    "time() - min by (site) "
                    "(actionscheduler_exporter_collector_last_success_timestamp_seconds"
                    f'{{{SITE},collector!="kubernetes"}})',
                    "{{site}} totals age (s)",
                ),
                Query(
                    f"count by (site) (actionscheduler_exporter_collector_success{{{SITE}}} == 0)",
                    "{{site}} failed collectors",
                    may_be_empty="no collector fails on a healthy store",
                ),
                Query(
                    "sum by (site) (increase("
                    f"actionscheduler_log_rows_missed_total{{{SITE}}}[1h]))",
                    "{{site}} log rows missed (1h)",
                ),
            ],
            width=12,
            runbook="site-down.md",
        ),
        Panel(
            "Database time used by the exporter",
            "timeseries",
            "Share of one database connection the exporter's own statements keep busy, "
            "per tier: hot (every scrape) and heavy (the background walk of the totals, on "
            "the read replica when the site has one). 0.01 is 1 % of a core. With a "
            "replica: its lag, and whether the last refresh used it (0: it fell back).",
            [
                Query(
                    "sum by (site, tier) (rate("
                    f"actionscheduler_exporter_database_seconds_total{{{SITE}}}[5m]))",
                    "{{site}} {{tier}}",
                ),
                Query(
                    f"actionscheduler_exporter_replica_lag_seconds{{{SITE}}}",
                    "{{site}} replica lag (s)",
                    may_be_empty="only for a site with a read replica",
                ),
                Query(
                    f"actionscheduler_exporter_replica_used{{{SITE}}}",
                    "{{site}} replica used",
                    may_be_empty="only for a site with a read replica",
                ),
            ],
            unit="none",
            width=12,
        ),
    ]


def build() -> Json:
    return dashboard(
        UID,
        "Action Scheduler / Overview",
        "Is each site's Action Scheduler queue healthy, and if not, where? "
        "From actionscheduler-exporter.",
        site_variables(),
        panels(),
        [dashboard_link("Hooks and groups", "actionscheduler-hooks"), RUNBOOK_INDEX],
    )
