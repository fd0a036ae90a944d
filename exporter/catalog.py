"""Every metric family the exporter can emit: the single source of truth.

Collectors emit samples that refer to these definitions; docs/metrics.md is checked
against this list by the tests, and so are the rules and dashboards that use them.
Every family also carries the `site` label and the site's constant labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricKind = Literal["gauge", "counter", "info", "histogram"]

STATUSES: tuple[str, ...] = ("pending", "in-progress", "complete", "failed", "canceled")
TABLES: tuple[str, ...] = ("actions", "claims", "groups", "logs")
OTHER = "other"


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: MetricKind
    help: str
    labels: tuple[str, ...] = ()

    @property
    def sample_name(self) -> str:
        """The name a sample carries in the text exposition."""
        if self.kind == "counter":
            return f"{self.name}_total"
        if self.kind == "info":
            return f"{self.name}_info"
        return self.name


def _gauge(name: str, help_text: str, *labels: str) -> MetricDef:
    return MetricDef(name, "gauge", help_text, labels)


UP = _gauge(
    "actionscheduler_up",
    "1 when the site's database answered and all four Action Scheduler tables exist.",
)
TABLE_EXISTS = _gauge(
    "actionscheduler_table_exists",
    "1 when the Action Scheduler table exists and is readable by the exporter's user.",
    "table",
)
ACTIONS = _gauge(
    "actionscheduler_actions",
    "Actions by status; all five statuses are always present.",
    "status",
)
ACTIONS_BY_GROUP = _gauge(
    "actionscheduler_actions_by_group",
    'Actions by status and group (top-N groups, the rest folded into group="other").',
    "status",
    "group",
)
DUE_ACTIONS = _gauge(
    "actionscheduler_due_actions",
    "Pending actions whose scheduled date has passed, by whether a runner has claimed them.",
    "claim",
)
UNDATED_PENDING = _gauge(
    "actionscheduler_undated_pending_actions",
    "Pending actions whose scheduled date is the zero date or NULL.",
    "date",
)
OLDEST_DUE_AGE = _gauge(
    "actionscheduler_oldest_due_action_age_seconds",
    "Seconds since the oldest due pending action was scheduled to run; 0 when nothing is due.",
)
IN_PROGRESS = _gauge(
    "actionscheduler_in_progress_actions",
    "Actions currently in progress.",
)
OLDEST_IN_PROGRESS_AGE = _gauge(
    "actionscheduler_oldest_in_progress_action_age_seconds",
    "Seconds since the oldest in-progress action started; 0 when none runs.",
)
ACTIVE_CLAIMS = _gauge(
    "actionscheduler_active_claims",
    "Claims that hold pending or in-progress actions, counted as Action Scheduler's runner does.",
)
CLAIM_ROWS = _gauge(
    "actionscheduler_claim_rows",
    "Rows in the claims table.",
)
OLDEST_CLAIM_AGE = _gauge(
    "actionscheduler_oldest_claim_age_seconds",
    "Seconds since the oldest row of the claims table was created; 0 when the table is empty.",
)
ORPHANED_CLAIMS = _gauge(
    "actionscheduler_orphaned_claims",
    "Claim rows older than the timeout period that no pending or in-progress action refers to.",
)
STALE_CLAIMED_PENDING = _gauge(
    "actionscheduler_stale_claimed_pending_actions",
    "Claimed pending actions older than the timeout period: the cleaner will reset them.",
)
FAILED_BY_HOOK = _gauge(
    "actionscheduler_failed_actions",
    'Failed actions by hook (top-N hooks, the rest folded into hook="other").',
    "hook",
)
CONCURRENT_BATCHES_LIMIT = _gauge(
    "actionscheduler_concurrent_batches_limit",
    "The site's configured concurrent-batches limit "
    "(action_scheduler_queue_runner_concurrent_batches).",
)
TIMEOUT_PERIOD = _gauge(
    "actionscheduler_timeout_period_seconds",
    "The timeout and failure period the exporter applies, as configured for the site.",
)
TABLE_ROWS = _gauge(
    "actionscheduler_table_rows",
    "Rows in the table, as estimated by the server's table statistics.",
    "table",
)
TABLE_SIZE = _gauge(
    "actionscheduler_table_size_bytes",
    "Data and index size of the table, from the server's table statistics.",
    "table",
)
OLDEST_FINISHED_AGE = _gauge(
    "actionscheduler_oldest_finished_action_age_seconds",
    "Seconds since the oldest complete or canceled action last ran; 0 when there is none.",
)
FOLDED_LABEL_VALUES = _gauge(
    "actionscheduler_exporter_folded_label_values",
    'Distinct label values folded into "other" by the top-N limit in the last scrape.',
    "label",
)
COLLECTOR_SUCCESS = _gauge(
    "actionscheduler_exporter_collector_success",
    "1 when the collector's queries succeeded in the last scrape.",
    "collector",
)
COLLECTOR_DURATION = _gauge(
    "actionscheduler_exporter_collector_duration_seconds",
    "Time the collector's queries took in the last scrape.",
    "collector",
)
COLLECTOR_AGE = _gauge(
    "actionscheduler_exporter_collector_age_seconds",
    "Seconds since a heavy-tier collector's values were read (refreshed in the background "
    "every heavy_interval); absent for the hot tier, which is read on every scrape.",
    "collector",
)
HEAVY_INTERVAL = _gauge(
    "actionscheduler_exporter_heavy_interval_seconds",
    "The site's heavy_interval: how often the heavy tier is refreshed (0: on every scrape).",
)
USER_CAN_WRITE = _gauge(
    "actionscheduler_exporter_database_user_can_write",
    "1 when SHOW GRANTS gives the exporter's database user a writing privilege on the "
    "site's database: it should have SELECT on the four tables only.",
)
SCRAPE_DURATION = _gauge(
    "actionscheduler_exporter_scrape_duration_seconds",
    "Time the last round of queries for the site took.",
)
ERRORS = MetricDef(
    "actionscheduler_exporter_errors",
    "counter",
    "Errors met while collecting the site's metrics, by kind.",
    ("kind",),
)
BUILD_INFO = MetricDef(
    "actionscheduler_exporter_build",
    "info",
    "The exporter's version and the Python it runs on (no site label).",
    ("version", "python_version"),
)

THRESHOLD_OLDEST_DUE_WARNING = _gauge(
    "actionscheduler_alert_threshold_oldest_due_warning_seconds",
    "Alert threshold: age of the oldest due action that warns (site's alerts.oldest_due_warning).",
)
THRESHOLD_OLDEST_DUE_CRITICAL = _gauge(
    "actionscheduler_alert_threshold_oldest_due_critical_seconds",
    "Alert threshold: age of the oldest due action that pages (alerts.oldest_due_critical).",
)
THRESHOLD_DRAIN_TARGET = _gauge(
    "actionscheduler_alert_threshold_drain_target_seconds",
    "Alert threshold: the longest acceptable estimated drain time of the due backlog "
    "(alerts.drain_target).",
)
THRESHOLD_FAILURE_RATIO = _gauge(
    "actionscheduler_alert_threshold_failure_ratio",
    "Alert threshold: share of a hook's runs that fail (alerts.failure_ratio).",
)
THRESHOLD_FAILURE_RATE = _gauge(
    "actionscheduler_alert_threshold_failures_per_second",
    "Alert threshold: failures per second of one hook (alerts.failure_rate).",
)
THRESHOLD_RESTARTS = _gauge(
    "actionscheduler_alert_threshold_restarts",
    "Alert threshold: worker container restarts within 15 minutes (alerts.restarts).",
)
WORKER_INFO = MetricDef(
    "actionscheduler_worker",
    "info",
    "Where the site's queue workers run (site's workers: setting), for joining "
    "kube-state-metrics series to the site.",
    ("namespace", "deployment", "container", "horizontalpodautoscaler"),
)

KUBERNETES_UP = _gauge(
    "actionscheduler_kubernetes_up",
    "1 when the Kubernetes API answered the last reading of the site's workers "
    "(kubernetes: setting).",
)
KUBERNETES_ERRORS = MetricDef(
    "actionscheduler_kubernetes_errors",
    "counter",
    "Failed readings of the site's workers from the Kubernetes API, by kind: config, "
    "connect, timeout, unauthorized, forbidden, not_found, http.",
    ("kind",),
)
WORKER_RESTARTS = MetricDef(
    "actionscheduler_worker_container_restarts",
    "counter",
    "Restarts of the worker container, per pod, as Kubernetes reports them.",
    ("pod",),
)
WORKER_LAST_TERMINATION = _gauge(
    "actionscheduler_worker_container_last_terminated_reason",
    "1 per worker pod whose container terminated before, with the reason Kubernetes gave "
    "(OOMKilled, Error, Completed...).",
    "pod",
    "reason",
)
WORKER_PODS = _gauge(
    "actionscheduler_worker_pods", "Worker pods, by whether they are ready.", "ready"
)
WORKER_DEPLOYMENT_REPLICAS = _gauge(
    "actionscheduler_worker_deployment_replicas",
    "Replicas of the worker Deployment: desired, updated, available.",
    "state",
)
WORKER_AUTOSCALER_REPLICAS = _gauge(
    "actionscheduler_worker_autoscaler_replicas",
    "Replicas of the workers' HorizontalPodAutoscaler (the one KEDA creates): current, "
    "desired, maximum.",
    "state",
)

_EVENT_LABELS = ("hook", "group")
CREATED = MetricDef(
    "actionscheduler_actions_created",
    "counter",
    "Actions created, from the log (since the exporter started).",
    _EVENT_LABELS,
)
STARTED = MetricDef(
    "actionscheduler_actions_started",
    "counter",
    "Action runs started, from the log.",
    _EVENT_LABELS,
)
COMPLETED = MetricDef(
    "actionscheduler_actions_completed",
    "counter",
    "Action runs completed, from the log.",
    _EVENT_LABELS,
)
FAILED = MetricDef(
    "actionscheduler_actions_failed",
    "counter",
    "Action runs failed, from the log, by reason: exception, timeout, fatal, no_callback, unknown.",
    (*_EVENT_LABELS, "reason"),
)
CANCELED = MetricDef(
    "actionscheduler_actions_canceled", "counter", "Actions canceled, from the log.", _EVENT_LABELS
)
RESET = MetricDef(
    "actionscheduler_actions_reset",
    "counter",
    "Claimed actions the cleaner released after the timeout period, from the log.",
    _EVENT_LABELS,
)
START_DELAY = MetricDef(
    "actionscheduler_action_start_delay_seconds",
    "histogram",
    "From an action's scheduled date to the start of its run (log dates, 1 s resolution).",
    ("group",),
)
RUN_DURATION = MetricDef(
    "actionscheduler_action_run_duration_seconds",
    "histogram",
    "From the start of a run to its completion or failure (log dates, 1 s resolution).",
    ("hook",),
)
LOG_ROWS_READ = MetricDef(
    "actionscheduler_log_rows_read", "counter", "Log rows the exporter has read."
)
LOG_ROWS_UNCLASSIFIED = MetricDef(
    "actionscheduler_log_rows_unclassified",
    "counter",
    "Log rows whose message was not recognised and whose event could not be inferred from "
    "the action's status (translated sites: created and started events).",
)
LOG_CURSOR_LAG = _gauge(
    "actionscheduler_log_cursor_lag_rows",
    "How far the log cursor is behind the newest log row (log_id difference); it catches up "
    "at most log_rows_per_scrape rows a scrape.",
)
LOG_CURSOR_RESETS = MetricDef(
    "actionscheduler_log_cursor_resets",
    "counter",
    "Times the log table's ids went backwards (truncated or re-created) and the cursor "
    "restarted from the beginning.",
)

ALL: tuple[MetricDef, ...] = (
    UP,
    TABLE_EXISTS,
    ACTIONS,
    ACTIONS_BY_GROUP,
    DUE_ACTIONS,
    UNDATED_PENDING,
    OLDEST_DUE_AGE,
    IN_PROGRESS,
    OLDEST_IN_PROGRESS_AGE,
    ACTIVE_CLAIMS,
    CLAIM_ROWS,
    OLDEST_CLAIM_AGE,
    ORPHANED_CLAIMS,
    STALE_CLAIMED_PENDING,
    FAILED_BY_HOOK,
    CONCURRENT_BATCHES_LIMIT,
    TIMEOUT_PERIOD,
    THRESHOLD_OLDEST_DUE_WARNING,
    THRESHOLD_OLDEST_DUE_CRITICAL,
    THRESHOLD_DRAIN_TARGET,
    THRESHOLD_FAILURE_RATIO,
    THRESHOLD_FAILURE_RATE,
    THRESHOLD_RESTARTS,
    WORKER_INFO,
    KUBERNETES_UP,
    KUBERNETES_ERRORS,
    WORKER_RESTARTS,
    WORKER_LAST_TERMINATION,
    WORKER_PODS,
    WORKER_DEPLOYMENT_REPLICAS,
    WORKER_AUTOSCALER_REPLICAS,
    TABLE_ROWS,
    TABLE_SIZE,
    OLDEST_FINISHED_AGE,
    CREATED,
    STARTED,
    COMPLETED,
    FAILED,
    CANCELED,
    RESET,
    START_DELAY,
    RUN_DURATION,
    LOG_ROWS_READ,
    LOG_ROWS_UNCLASSIFIED,
    LOG_CURSOR_LAG,
    LOG_CURSOR_RESETS,
    FOLDED_LABEL_VALUES,
    COLLECTOR_SUCCESS,
    COLLECTOR_DURATION,
    COLLECTOR_AGE,
    HEAVY_INTERVAL,
    USER_CAN_WRITE,
    SCRAPE_DURATION,
    ERRORS,
    BUILD_INFO,
)

# Error kinds are initialised at 0 so that rate() works from the first failure on.
ERROR_KINDS: tuple[str, ...] = ("connect", "query", "timeout", "missing_table", "deadline")

FAILURE_REASONS: tuple[str, ...] = ("exception", "timeout", "fatal", "no_callback", "unknown")
KUBERNETES_ERROR_KINDS: tuple[str, ...] = (
    "config",
    "connect",
    "timeout",
    "unauthorized",
    "forbidden",
    "not_found",
    "http",
)
