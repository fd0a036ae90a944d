"""Every metric family the exporter can emit: the single source of truth.

Collectors emit samples that refer to these definitions; docs/metrics.md is checked
against this list by the tests, and so are the rules and dashboards that use them.
Every family also carries the `site` label and the site's constant labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricKind = Literal["gauge", "counter", "info"]

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
    TABLE_ROWS,
    TABLE_SIZE,
    OLDEST_FINISHED_AGE,
    FOLDED_LABEL_VALUES,
    COLLECTOR_SUCCESS,
    COLLECTOR_DURATION,
    SCRAPE_DURATION,
    ERRORS,
    BUILD_INFO,
)

# Error kinds are initialised at 0 so that rate() works from the first failure on.
ERROR_KINDS: tuple[str, ...] = ("connect", "query", "timeout", "missing_table", "deadline")
