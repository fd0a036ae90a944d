"""Every metric family the exporter can emit, each described once: the source of truth.

An entry carries what the exposition needs (name, type, labels, help), what the reader of
docs/metrics.md needs (meaning, section) and when its value is read (tier). The list of
families (`ALL`), the label names a site's constant labels may not take
(`RESERVED_LABELS`) and the tables of docs/metrics.md are derived from these entries; the
tests check that the docs, the rules and the dashboards agree with them.
Every family but the build info and the reload status also carries `site` and the site's
constant labels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

MetricKind = Literal["gauge", "counter", "info", "histogram"]
# hot: read on every scrape; heavy: refreshed in the background every heavy_interval;
# none: no query (configuration, the Kubernetes API, the exporter's own state).
Tier = Literal["hot", "heavy", "none"]
# The table of docs/metrics.md an entry is listed in.
Section = Literal["queue", "settings", "workers", "log", "exporter"]

OTHER = "other"


# Compared and hashed by identity: each is defined once (`_define`), and a thousand sites'
# scrape hashes them hundreds of thousands of times (samples, counters, the writer), which
# by value meant hashing seven fields each time.
@dataclass(frozen=True, eq=False)
class MetricDef:
    name: str
    kind: MetricKind
    help: str
    meaning: str
    tier: Tier
    section: Section
    labels: tuple[str, ...] = ()

    @functools.cached_property
    def sample_name(self) -> str:
        """The name a sample carries in the text exposition."""
        if self.kind == "counter":
            return f"{self.name}_total"
        if self.kind == "info":
            return f"{self.name}_info"
        return self.name


_DEFINED: list[MetricDef] = []


def _define(
    name: str,
    kind: MetricKind,
    help_text: str,
    *,
    tier: Tier,
    section: Section,
    labels: tuple[str, ...] = (),
    meaning: str = "",
) -> MetricDef:
    """A family, listed in `ALL` in the order of definition (the exposition's order).

    `meaning` is the longer text of docs/metrics.md; without one the help text serves."""
    metric = MetricDef(name, kind, help_text, meaning or help_text, tier, section, labels)
    _DEFINED.append(metric)
    return metric


# Queue state ----------------------------------------------------------------------------

UP = _define(
    "actionscheduler_up",
    "gauge",
    "1 when the site's database answered and all four Action Scheduler tables exist.",
    tier="hot",
    section="queue",
    meaning="1 when the database answered and all four Action Scheduler tables exist; 0 "
    "otherwise (see `actionscheduler_table_exists` and the log for the reason).",
)
TABLE_EXISTS = _define(
    "actionscheduler_table_exists",
    "gauge",
    "1 when the Action Scheduler table exists and is readable by the exporter's user.",
    tier="hot",
    section="queue",
    labels=("table",),
    meaning="1 per table (`actions`, `claims`, `groups`, `logs`) that exists and that the "
    "exporter's user can read. A missing table means the plugin is not installed or the "
    "prefix is wrong.",
)
ACTIONS = _define(
    "actionscheduler_actions",
    "gauge",
    "Actions by status; all five statuses are always present.",
    tier="heavy",
    section="queue",
    labels=("status",),
    meaning="Actions per status. All five statuses (`pending`, `in-progress`, `complete`, "
    "`failed`, `canceled`) are always present; any other value found in the table is "
    'counted as `status="unknown"`.',
)
ACTIONS_BY_GROUP = _define(
    "actionscheduler_actions_by_group",
    "gauge",
    'Actions by status and group (top-N groups, the rest folded into group="other").',
    tier="heavy",
    section="queue",
    labels=("status", "group"),
    meaning="Actions per status and group. The `top_groups` largest groups keep their slug, "
    'the rest are summed under `group="other"`; actions without a group have `group=""`.',
)
DUE_ACTIONS = _define(
    "actionscheduler_due_actions",
    "gauge",
    "Pending actions whose scheduled date has passed, by whether a runner has claimed them.",
    tier="hot",
    section="queue",
    labels=("claim",),
    meaning="Pending actions with `scheduled_date_gmt <= UTC_TIMESTAMP()`, split "
    '`claim="unclaimed"` (waiting for a runner) and `claim="claimed"` (in a runner\'s '
    "batch). This is what Action Scheduler's own claim query would take, zero-dated rows "
    "included: the autoscaling signal. Future-scheduled actions are never counted.",
)
UNDATED_PENDING = _define(
    "actionscheduler_undated_pending_actions",
    "gauge",
    "Pending actions whose scheduled date is the zero date or NULL.",
    tier="hot",
    section="queue",
    labels=("date",),
    meaning='Pending actions whose scheduled date is the zero date (`date="zero"`; they '
    'are due and counted in `actionscheduler_due_actions` too) or NULL (`date="null"`; '
    "Action Scheduler never claims them). Read about every `anomalies_interval` (a minute "
    "by default; up to a quarter of it early, with other stores of the server whose reading "
    "comes due).",
)
OLDEST_DUE_AGE = _define(
    "actionscheduler_oldest_due_action_age_seconds",
    "gauge",
    "Seconds since the oldest due pending action was scheduled to run; 0 when nothing is due.",
    tier="hot",
    section="queue",
    meaning="How long the oldest due pending action has waited since its scheduled date. "
    'For a zero-dated action the age is taken from its first log row ("action created", '
    "found by position, so translated sites work); one with no log row is counted above "
    "but gives no age.",
)
DUE_BY_GROUP = _define(
    "actionscheduler_due_actions_by_group",
    "gauge",
    "Due pending actions by group (top-N groups and the configured ones, the rest folded "
    'into group="other").',
    tier="hot",
    section="queue",
    labels=("group",),
    meaning="Due pending actions (claimed or not, as `actionscheduler_due_actions` counts "
    "them) per group, from the oldest `due_split_rows` due actions. The `top_groups` groups "
    "with the largest backlog and the groups named in the site's `groups:` keep their slug "
    "(a named group is exported at 0 when nothing of it is due); the rest are summed under "
    '`group="other"`; actions without a group have `group=""`. Due actions beyond '
    "`due_split_rows` are in `actionscheduler_due_actions_unsplit` instead.",
)
DUE_BY_HOOK = _define(
    "actionscheduler_due_actions_by_hook",
    "gauge",
    "Due pending actions by hook (top-N hooks and the configured ones, the rest folded into "
    'hook="other").',
    tier="hot",
    section="queue",
    labels=("hook",),
    meaning="Due pending actions per hook, from the same oldest `due_split_rows` due actions "
    "as the groups; `top_hooks` hooks and those named in the site's `hooks:` keep their name.",
)
OLDEST_DUE_AGE_BY_GROUP = _define(
    "actionscheduler_oldest_due_action_age_seconds_by_group",
    "gauge",
    "Seconds since the oldest due pending action of the group was scheduled; 0 when none is due.",
    tier="hot",
    section="queue",
    labels=("group",),
    meaning="`actionscheduler_oldest_due_action_age_seconds` per group (same groups and "
    "folding; `other` has the oldest of the folded groups). Zero-dated actions take their "
    "age from their first log row, as for the site.",
)
OLDEST_DUE_AGE_BY_HOOK = _define(
    "actionscheduler_oldest_due_action_age_seconds_by_hook",
    "gauge",
    "Seconds since the oldest due pending action of the hook was scheduled; 0 when none is due.",
    tier="hot",
    section="queue",
    labels=("hook",),
    meaning="`actionscheduler_oldest_due_action_age_seconds` per hook, for the same hooks as "
    "`actionscheduler_due_actions_by_hook` (`other`: the oldest of the folded hooks).",
)
DUE_UNSPLIT = _define(
    "actionscheduler_due_actions_unsplit",
    "gauge",
    "Due pending actions beyond the due_split_rows oldest: counted, not split by group.",
    tier="hot",
    section="queue",
    meaning="Due actions newer than the oldest `due_split_rows` (0 while the backlog fits). "
    "The per-group and per-hook series leave them out; the chart's per-pool autoscaling "
    "queries count them in every pool, so a large backlog scales every pool up.",
)
IN_PROGRESS = _define(
    "actionscheduler_in_progress_actions",
    "gauge",
    "Actions currently in progress.",
    tier="hot",
    section="queue",
    meaning="Actions with status `in-progress`.",
)
OLDEST_IN_PROGRESS_AGE = _define(
    "actionscheduler_oldest_in_progress_action_age_seconds",
    "gauge",
    "Seconds since the oldest in-progress action started; 0 when none runs.",
    tier="hot",
    section="queue",
    meaning="How long the oldest in-progress action has run (from `last_attempt_gmt`, which "
    "starting an action sets). A worker killed mid-batch shows here long before the "
    "cleaner's failure period marks the action failed.",
)
ACTIVE_CLAIMS = _define(
    "actionscheduler_active_claims",
    "gauge",
    "Claims that hold pending or in-progress actions, counted as Action Scheduler's runner does.",
    tier="hot",
    section="queue",
    meaning="`COUNT(DISTINCT claim_id)` over pending and in-progress actions with a claim: "
    "exactly the number the runner compares with the concurrent-batches limit before it "
    'prints "There are too many concurrent batches".',
)
CLAIM_ROWS = _define(
    "actionscheduler_claim_rows",
    "gauge",
    "Rows in the claims table.",
    tier="hot",
    section="queue",
)
OLDEST_CLAIM_AGE = _define(
    "actionscheduler_oldest_claim_age_seconds",
    "gauge",
    "Seconds since the oldest row of the claims table was created; 0 when the table is empty.",
    tier="hot",
    section="queue",
    meaning="Age of the oldest claims row.",
)
ORPHANED_CLAIMS = _define(
    "actionscheduler_orphaned_claims",
    "gauge",
    "Claim rows older than the timeout period that no pending or in-progress action refers to.",
    tier="hot",
    section="queue",
    meaning="Claim rows older than the timeout period that no pending or in-progress action "
    "refers to. Each is a batch whose worker died without releasing its claim (nothing ever "
    "deletes these rows). Younger ones are left out: every healthy batch has such a row for "
    "a moment. Read about every `anomalies_interval` (a minute by default; up to a quarter "
    "of it early, with other stores of the server whose reading comes due).",
)
STALE_CLAIMED_PENDING = _define(
    "actionscheduler_stale_claimed_pending_actions",
    "gauge",
    "Claimed pending actions older than the timeout period: the cleaner will reset them.",
    tier="hot",
    section="queue",
    meaning="Claimed pending actions whose claim is older than the timeout period: the "
    "actions of a dead worker's batch, which the cleaner will reset at the next batch. Read "
    "about every `anomalies_interval` (a minute by default; up to a quarter of it early, "
    "with other stores of the server whose reading comes due).",
)
FAILED_BY_HOOK = _define(
    "actionscheduler_failed_actions",
    "gauge",
    'Failed actions by hook (top-N hooks, the rest folded into hook="other").',
    tier="heavy",
    section="queue",
    labels=("hook",),
    meaning="Failed actions the table keeps, per hook (the `top_hooks` hooks with most "
    'failures keep their name, the rest are summed under `hook="other"`). Action Scheduler '
    "3.x keeps failed actions for good; 4.0+ deletes them after "
    "`action_scheduler_retention_period_for_failed` (three 31-day months by default), so "
    "this gauge drops by as many as the daily cleanup purges. It is what the table holds, "
    "not a history: alert on the failure counters from the log "
    "(`actionscheduler_actions_failed_total`), never on an increase of this gauge, which "
    "Prometheus reads across a purge as a counter reset.",
)
CONCURRENT_BATCHES_LIMIT = _define(
    "actionscheduler_concurrent_batches_limit",
    "gauge",
    "The site's configured concurrent-batches limit "
    "(action_scheduler_queue_runner_concurrent_batches).",
    tier="none",
    section="queue",
    meaning="The site's `concurrent_batches_limit` from the configuration (Action "
    "Scheduler's `action_scheduler_queue_runner_concurrent_batches` filter). Absent when "
    "not configured.",
)
TIMEOUT_PERIOD = _define(
    "actionscheduler_timeout_period_seconds",
    "gauge",
    "The timeout and failure period the exporter applies, as configured for the site.",
    tier="none",
    section="queue",
    meaning="The site's `timeout_period` (default 300 s, Action Scheduler's "
    "`action_scheduler_timeout_period` and failure period), which the orphan and stale "
    "counts use.",
)

# Settings the alerting rules compare with -------------------------------------------------

THRESHOLD_OLDEST_DUE_WARNING = _define(
    "actionscheduler_alert_threshold_oldest_due_warning_seconds",
    "gauge",
    "Alert threshold: age of the oldest due action that warns (site's alerts.oldest_due_warning).",
    tier="none",
    section="settings",
    meaning="`alerts.oldest_due_warning` (default 15m): the oldest due action is late.",
)
THRESHOLD_OLDEST_DUE_CRITICAL = _define(
    "actionscheduler_alert_threshold_oldest_due_critical_seconds",
    "gauge",
    "Alert threshold: age of the oldest due action that pages (alerts.oldest_due_critical).",
    tier="none",
    section="settings",
    meaning="`alerts.oldest_due_critical` (default 24h, Action Scheduler's own past-due notice).",
)
THRESHOLD_GROUP_OLDEST_DUE_WARNING = _define(
    "actionscheduler_alert_threshold_group_oldest_due_warning_seconds",
    "gauge",
    "Alert threshold of a group with its own: age of its oldest due action that warns "
    "(groups.<slug>.alerts.oldest_due_warning).",
    tier="none",
    section="settings",
    labels=("group",),
    meaning="Exported for each group of the site's `groups:` that has thresholds of its own "
    "(the one it leaves out is the site's). The site's alerts leave such groups to the "
    "per-group alerts.",
)
THRESHOLD_GROUP_OLDEST_DUE_CRITICAL = _define(
    "actionscheduler_alert_threshold_group_oldest_due_critical_seconds",
    "gauge",
    "Alert threshold of a group with its own: age of its oldest due action that pages "
    "(groups.<slug>.alerts.oldest_due_critical).",
    tier="none",
    section="settings",
    labels=("group",),
)
THRESHOLD_DRAIN_TARGET = _define(
    "actionscheduler_alert_threshold_drain_target_seconds",
    "gauge",
    "Alert threshold: the longest acceptable estimated drain time of the due backlog "
    "(alerts.drain_target).",
    tier="none",
    section="settings",
    meaning="`alerts.drain_target` (default 1h): the longest acceptable estimated time to "
    "drain the due backlog.",
)
THRESHOLD_FAILURE_RATIO = _define(
    "actionscheduler_alert_threshold_failure_ratio",
    "gauge",
    "Alert threshold: share of a hook's runs that fail (alerts.failure_ratio).",
    tier="none",
    section="settings",
    meaning="`alerts.failure_ratio` (default 0.1): share of a hook's runs that may fail.",
)
THRESHOLD_FAILURE_RATE = _define(
    "actionscheduler_alert_threshold_failures_per_second",
    "gauge",
    "Alert threshold: failures per second of one hook (alerts.failure_rate).",
    tier="none",
    section="settings",
    meaning="`alerts.failure_rate` (default 0.1, six a minute): failures per second of one hook.",
)
THRESHOLD_RESTARTS = _define(
    "actionscheduler_alert_threshold_restarts",
    "gauge",
    "Alert threshold: worker container restarts within 15 minutes (alerts.restarts).",
    tier="none",
    section="settings",
    meaning="`alerts.restarts` (default 3): worker container restarts within 15 minutes.",
)
DEDICATED_WORKERS = _define(
    "actionscheduler_dedicated_workers",
    "gauge",
    "1 when only dedicated workers (wp action-scheduler run) should run the site's queue "
    "(site's dedicated_workers setting; on by default when workers: is set).",
    tier="none",
    section="settings",
    meaning="1 when the site declares that only its dedicated workers run the queue (the "
    "must-use plugin turns off WP-Cron's and the async request's runners): `dedicated_workers` "
    "in the site's configuration, true by default when `workers` is set, and set by the "
    "chart for the site its workers run. Runs by web requests then raise an alert.",
)
WORKER_INFO = _define(
    "actionscheduler_worker",
    "info",
    "Where the site's queue workers run (site's workers: setting), for joining "
    "kube-state-metrics series to the site.",
    tier="none",
    section="settings",
    labels=(
        "worker_namespace",
        "deployment",
        "worker_container",
        "horizontalpodautoscaler",
        "runs",
    ),
    meaning="Where the site's workers run (`workers:` setting, one entry per Deployment: "
    "the chart writes one per worker pool; `runs` says what the pool runs, from the "
    "entry's `runs:`, empty for all; the HPA defaults to "
    "`keda-hpa-<deployment>`, KEDA's name). Joins kube-state-metrics series to the site, "
    "through the recording rule `site_workload:actionscheduler_worker_info:max`, which "
    "names the labels as kube-state-metrics does. `worker_namespace` and "
    "`worker_container`, not `namespace` and `container`: the Prometheus Operator gives "
    "every target those labels (the exporter's own pod), so the worker's would become "
    "`exported_*` or override them. Absent when not configured.",
)

# Workers, from the Kubernetes API ----------------------------------------------------------

KUBERNETES_UP = _define(
    "actionscheduler_kubernetes_up",
    "gauge",
    "1 when the Kubernetes API answered the last reading of the site's workers "
    "(kubernetes: setting).",
    tier="none",
    section="workers",
    meaning="1 when the last reading of the API succeeded.",
)
KUBERNETES_ERRORS = _define(
    "actionscheduler_kubernetes_errors",
    "counter",
    "Failed readings of the site's workers from the Kubernetes API, by kind: config, "
    "connect, timeout, unauthorized, forbidden, not_found, http.",
    tier="none",
    section="workers",
    labels=("kind",),
    meaning="Failed readings: `config` (no credentials), `connect`, `timeout`, "
    "`unauthorized` (401, after re-reading a rotated token), `forbidden` (403: the log names "
    "the RBAC verb and resource missing), `not_found`, `http`, `malformed` (an answer that "
    "could not be read).",
)
WORKER_RESTARTS = _define(
    "actionscheduler_worker_container_restarts",
    "counter",
    "Restarts of the worker container, per pod, as Kubernetes reports them.",
    tier="none",
    section="workers",
    labels=("worker_pod",),
    meaning="Restarts of the worker container per pod, as Kubernetes reports them "
    "(`restartCount`). `worker_pod`, not `pod`, which the Prometheus Operator sets to the "
    "exporter's own pod.",
)
WORKER_LAST_TERMINATION = _define(
    "actionscheduler_worker_container_last_terminated_reason",
    "gauge",
    "1 per worker pod whose container terminated before, with the reason Kubernetes gave "
    "(OOMKilled, Error, Completed...).",
    tier="none",
    section="workers",
    labels=("worker_pod", "reason"),
    meaning="1 per pod whose worker container terminated before, with the reason: "
    "`OOMKilled`, `Error`, `Completed`...",
)
WORKER_PODS = _define(
    "actionscheduler_worker_pods",
    "gauge",
    "Worker pods, by whether they are ready.",
    tier="none",
    section="workers",
    labels=("ready",),
    meaning="Worker pods, ready (`true`) and not ready (`false`).",
)
WORKER_DEPLOYMENT_REPLICAS = _define(
    "actionscheduler_worker_deployment_replicas",
    "gauge",
    "Replicas of the worker Deployment: desired, updated, available.",
    tier="none",
    section="workers",
    labels=("state",),
    meaning="The worker Deployment's `desired`, `updated` and `available` replicas.",
)
WORKER_AUTOSCALER_REPLICAS = _define(
    "actionscheduler_worker_autoscaler_replicas",
    "gauge",
    "Replicas of the workers' HorizontalPodAutoscaler (the one KEDA creates): current, "
    "desired, maximum.",
    tier="none",
    section="workers",
    labels=("state",),
    meaning="The autoscaler's `current`, `desired` and `maximum` replicas.",
)

# Table statistics and retention (queue section, after the workers in the exposition) -----

TABLE_ROWS = _define(
    "actionscheduler_table_rows",
    "gauge",
    "Rows in the table, as estimated by the server's table statistics.",
    tier="hot",
    section="queue",
    labels=("table",),
    meaning="Rows per table from the server's table statistics "
    "(`information_schema.TABLES.TABLE_ROWS`), not a `COUNT`: an estimate for InnoDB, "
    "refreshed by the server. On MySQL 8 the statistics are cached for "
    "`information_schema_stats_expiry` (a day by default). The exporter reads them about "
    "every five minutes per table prefix (and at once after a table went missing).",
)
TABLE_SIZE = _define(
    "actionscheduler_table_size_bytes",
    "gauge",
    "Data and index size of the table, from the server's table statistics.",
    tier="hot",
    section="queue",
    labels=("table",),
    meaning="Data plus index size per table, from the same statistics. A log table of 100 "
    "million rows shows here before the disk fills.",
)
RECURRING_HOOKS_STOPPED = _define(
    "actionscheduler_recurring_hooks_stopped",
    "gauge",
    "Recurring hooks Action Scheduler stopped: the latest action is a failed interval or "
    "cron action it did not reschedule, and none is pending or in progress (1 per hook; "
    "absent when none).",
    tier="heavy",
    section="queue",
    labels=("hook",),
    meaning="Hooks whose recurring job is gone: the hook's latest action (by scheduled "
    "date) is a failed interval or cron action (the `schedule` column's class), the "
    "hook has no pending or in-progress action, and Action Scheduler did not reschedule "
    "the failure: the hook's first five actions all failed (its consistent-failure rule "
    "at the default threshold, in any language), or the failure's log holds a stop row "
    "or the end of a run that never returned (the cleaner's mark, also in any language "
    "by its delay, or a PHP fatal error). 1 per such hook (folded hooks are summed "
    'under `hook="other"`); absent when there is none. An unschedule is intentional and '
    "not counted, also once the cleaner has purged its canceled row. On a translated "
    "site, a stop below the threshold after a plain failure is seen by "
    "`actionscheduler_recurring_actions_stopped_total` only.",
)
OLDEST_FINISHED_AGE = _define(
    "actionscheduler_oldest_finished_action_age_seconds",
    "gauge",
    "Seconds since the oldest complete or canceled action last ran; 0 when there is none.",
    tier="heavy",
    section="queue",
    meaning="Age of the oldest complete or canceled action (by `last_attempt_gmt`, the date "
    "the cleaner's purge uses). Above the retention period (31 days by default) the purge "
    "has stopped; on Action Scheduler 4.x, which purges once a day (3 am site time), allow "
    "a day more.",
)

# Throughput, failures and latency, from the log --------------------------------------------

_EVENT_LABELS = ("hook", "group")
CREATED = _define(
    "actionscheduler_actions_created",
    "counter",
    "Actions created, from the log (since the exporter started).",
    tier="hot",
    section="log",
    labels=_EVENT_LABELS,
    meaning='Actions created ("action created"; recurring actions log one per new occurrence).',
)
STARTED = _define(
    "actionscheduler_actions_started",
    "counter",
    "Action runs started, from the log.",
    tier="hot",
    section="log",
    labels=_EVENT_LABELS,
    meaning='Runs started ("action started via …").',
)
STARTED_BY_RUNNER = _define(
    "actionscheduler_actions_started_by_runner",
    "counter",
    "Action runs started, from the log, by the runner that started them: wp_cli, wp_cron, "
    "async_request, admin_list_table, other.",
    tier="hot",
    section="log",
    labels=("runner",),
    meaning='Runs started, by `runner`, the context of "action started via …": `wp_cli` '
    "(`wp action-scheduler run`, the dedicated workers, and the persistent "
    "`wp action-scheduler work` worker of Action Scheduler 4.x, which logs `WP CLI Worker`), "
    "`wp_cron` (WP-Cron's queue runner, "
    "inside a web request), `async_request` (the loopback request an admin page load "
    "starts), `admin_list_table` (someone pressed Run under Tools → Scheduled Actions), "
    "`other` (a plugin's own context, or none). Per site only: the hook and group of a run "
    "are in `actionscheduler_actions_started_total`, so series do not multiply by hook, "
    "group and runner. On translated sites the runner is read from the end of the message, "
    "where Action Scheduler leaves it untranslated.",
)
COMPLETED = _define(
    "actionscheduler_actions_completed",
    "counter",
    "Action runs completed, from the log.",
    tier="hot",
    section="log",
    labels=_EVENT_LABELS,
    meaning='Runs completed ("action complete via …").',
)
FAILED = _define(
    "actionscheduler_actions_failed",
    "counter",
    "Action runs failed, from the log, by reason: exception, timeout, fatal, no_callback, unknown.",
    tier="hot",
    section="log",
    labels=(*_EVENT_LABELS, "reason"),
    meaning='Runs failed, by `reason`: `exception` (the action threw: "action failed via '
    '…: message"), `timeout` (the cleaner marked an in-progress action failed after the '
    "failure period: the worker was killed or died), `fatal` (a PHP fatal error during the "
    'action: "unexpected shutdown"), `no_callback` (nothing is hooked to the action: '
    "typical after a release that renamed a hook, or old workers running new code), "
    "`unknown` (see below).",
)
FINISHED = _define(
    "actionscheduler_actions_finished",
    "counter",
    "Action runs that ended, from the log, by group and outcome: completed, failed.",
    tier="hot",
    section="log",
    labels=("group", "outcome"),
    meaning="The completed and failed counters summed over hooks, with the outcome as a "
    "label: the shape SLO tools read an availability indicator from (errors "
    '`outcome="failed"`, total: all outcomes, as one metric; see rules/README.md, '
    '"Service level objectives"). Every failure reason is `outcome="failed"`.',
)
CANCELED = _define(
    "actionscheduler_actions_canceled",
    "counter",
    "Actions canceled, from the log.",
    tier="hot",
    section="log",
    labels=_EVENT_LABELS,
)
RESET = _define(
    "actionscheduler_actions_reset",
    "counter",
    "Claimed actions the cleaner released after the timeout period, from the log.",
    tier="hot",
    section="log",
    labels=_EVENT_LABELS,
    meaning='Claimed actions the cleaner released after the timeout period ("action '
    "reset\"): a dead worker's batch being handed to another.",
)
RECURRING_STOPPED = _define(
    "actionscheduler_recurring_actions_stopped",
    "counter",
    "Recurring actions Action Scheduler did not reschedule, from the log, by reason: "
    "consistently_failing, next_instance_failed, unknown.",
    tier="hot",
    section="log",
    labels=("hook", "reason"),
    meaning="Recurring actions after whose run Action Scheduler (3.5+) scheduled no next "
    "occurrence, by `reason`: `consistently_failing` (the hook's last actions all failed, "
    "up to the filter `action_scheduler_recurring_action_failure_threshold`, 5 by default: "
    '"This action appears to be consistently failing"), `next_instance_failed` '
    '("There was a failure scheduling the next instance"), `unknown` (a translated '
    "site: the row logged right after the run's end on a recurring action, which only "
    "these two messages are; where the end was logged in English, a row of a plugin's "
    "own after it is not a stop). Hooks are folded like the other hook families.",
)
CORRUPTED_CANCELED = _define(
    "actionscheduler_corrupted_actions_canceled",
    "counter",
    "Actions Action Scheduler 4.0+ canceled because their data could not be read, from the log.",
    tier="hot",
    section="log",
    labels=_EVENT_LABELS,
    meaning="Actions Action Scheduler (4.0+) canceled when a runner could not read their "
    'data ("This action data appears to be corrupt. We are cancelling it…"): corrupted '
    'arguments or schedule, often an incomplete migration. Its "action canceled" row '
    "comes first and is counted in `actionscheduler_actions_canceled_total`; 4.x cleans "
    "the action's excess log rows up, so that row may be deleted before the exporter read "
    "it (then counted in `actionscheduler_log_rows_missed_total` instead). A recurring "
    "job canceled this way runs again only when its plugin schedules it again. On translated sites "
    "the row is counted as a cancellation.",
)
START_DELAY = _define(
    "actionscheduler_action_start_delay_seconds",
    "histogram",
    "From an action's scheduled date to the start of its run (log dates, 1 s resolution).",
    tier="hot",
    section="log",
    labels=("group",),
    meaning="From the action's scheduled date to the log row that started its run: how late "
    "the queue is. The number an SLO is written on. Zero-dated actions are not observed.",
)
RUN_DURATION = _define(
    "actionscheduler_action_run_duration_seconds",
    "histogram",
    "From the start of a run to its completion or failure (log dates, 1 s resolution).",
    tier="hot",
    section="log",
    labels=("hook",),
    meaning="From the start of a run to its completion or failure (the action's log row just "
    "before its end row). Timeouts are not observed: their end is the cleaner's, not the "
    "run's.",
)
START_DELAY_BY_HOOK = _define(
    "actionscheduler_action_start_delay_by_hook_seconds",
    "histogram",
    "From an action's scheduled date to the start of its run, by hook: a native histogram, "
    "in the protobuf exposition only.",
    tier="hot",
    section="log",
    labels=("hook",),
    meaning="The start delay by hook: a native histogram (schema 3, zero threshold 0.5 s), "
    "written only in the protobuf exposition, which Prometheus asks for when native "
    "histograms are enabled; the text formats have `actionscheduler_action_start_delay_"
    "seconds` by group only. Hooks are folded like the other hook families.",
)
LOG_ROWS_READ = _define(
    "actionscheduler_log_rows_read",
    "counter",
    "Log rows the exporter has read.",
    tier="hot",
    section="log",
    meaning="Log rows read.",
)
LOG_ROWS_UNCLASSIFIED = _define(
    "actionscheduler_log_rows_unclassified",
    "counter",
    "Log rows whose message was not recognised and whose event could not be inferred from "
    "its place in the action's log (translated sites: the created events).",
    tier="hot",
    section="log",
    meaning="Log rows whose message was not recognised and whose event could not be "
    "inferred (see below).",
)
LOG_CURSOR_LAG = _define(
    "actionscheduler_log_cursor_lag_rows",
    "gauge",
    "How many log rows up to the newest are not read yet (gaps waited for included); it "
    "catches up at most log_rows_per_scrape rows a scrape.",
    tier="hot",
    section="log",
    meaning="Log ids up to the newest not read yet: the rows that wait for the next scrapes "
    "and the gaps still waited for; rows already read beyond a gap are not counted, and with "
    "`auto_increment_increment` above 1 (Galera) only the ids of its stride.",
)
LOG_CURSOR_RESETS = _define(
    "actionscheduler_log_cursor_resets",
    "counter",
    "Times the log table's ids went backwards (truncated or re-created) and the cursor "
    "restarted from the beginning.",
    tier="hot",
    section="log",
    meaning="Times the log table's ids went backwards (truncated or re-created); the cursor "
    "then restarts from the table's first row.",
)

LOG_ROWS_MISSED = _define(
    "actionscheduler_log_rows_missed",
    "counter",
    "Log ids the cursor passed without a row to read: rows deleted before the exporter "
    "read them, or ids that never held a row.",
    tier="hot",
    section="log",
    meaning="Log ids the cursor gave up after `log_gap_grace` without a row to read. Most are "
    "rows deleted before the exporter read them: Action Scheduler deletes a canceled action "
    "that never ran together with its log rows at the next queue run (seconds later with a "
    "worker loop), and a purge can delete rows not read yet. The events of those rows are "
    "missing from the counters above (mostly `created` and `canceled`), by at most this "
    "many. Ids that never held a row count too: a rolled-back insert, or every skipped id "
    "where `auto_increment_increment` is above 1 (Galera).",
)

# The exporter itself ------------------------------------------------------------------------

FOLDED_LABEL_VALUES = _define(
    "actionscheduler_exporter_folded_label_values",
    "gauge",
    'Distinct label values folded into "other" by the top-N limit in the last scrape.',
    tier="heavy",
    section="exporter",
    labels=("label",),
    meaning="How many distinct `hook` or `group` values the top-N limit folded into `other` "
    "in the last scrape.",
)
COLLECTOR_SUCCESS = _define(
    "actionscheduler_exporter_collector_success",
    "gauge",
    "1 when the collector's queries succeeded in the last scrape.",
    tier="none",
    section="exporter",
    labels=("collector",),
    meaning="1 when the collector's last reading succeeded (for a background source, such "
    "as the heavy tier or the Kubernetes API: its last refresh), 0 when it failed, was "
    "skipped for the scrape's deadline, or the site was down.",
)
COLLECTOR_DURATION = _define(
    "actionscheduler_exporter_collector_duration_seconds",
    "gauge",
    "Time the collector's queries took in the last scrape.",
    tier="none",
    section="exporter",
    labels=("collector",),
    meaning="Time the collector's last reading took (background sources: their last refresh). "
    "Not written for `due`, `in_progress`, `claims`, `anomalies` and `tables`, whose values "
    "come from the "
    "round's one hot statement: its time is `actionscheduler_exporter_database_seconds_total"
    '{tier="hot"}`.',
)
COLLECTOR_LAST_SUCCESS = _define(
    "actionscheduler_exporter_collector_last_success_timestamp_seconds",
    "gauge",
    "Unix time of a background source's last successful reading (the heavy tier, refreshed "
    "every heavy_interval, and the Kubernetes API, every cache period); absent for sources "
    "read on every scrape.",
    tier="heavy",
    section="exporter",
    labels=("collector",),
    meaning="Unix time at which the values of a source read in the background were last "
    "read: the heavy-tier collectors (`status`, `failures`, `recurring`, `retention`) and "
    "`kubernetes`. It stays the same between refreshes and moves on at each one, so "
    "`time() - ...` is the values' age: it grows to the source's interval "
    "(`heavy_interval`, the Kubernetes `cache`) and falls back after each refresh; far "
    "above it, the refreshes fail (`actionscheduler_exporter_collector_success` 0 for that "
    "collector, the reason in the log), and the last good values are served meanwhile. "
    "Taken from the exporter's clock: keep it in step (NTP) with Prometheus'. Absent for "
    "collectors read on every scrape, and before a source's first success.",
)
HEAVY_INTERVAL = _define(
    "actionscheduler_exporter_heavy_interval_seconds",
    "gauge",
    "The site's heavy_interval: how often the heavy tier is refreshed (0: on every scrape).",
    tier="none",
    section="exporter",
    meaning="The site's `heavy_interval`: how often the heavy tier is refreshed (0: inside "
    "every scrape). The staleness alert compares the values' age with it.",
)
DATABASE_SECONDS = _define(
    "actionscheduler_exporter_database_seconds",
    "counter",
    "Time the exporter's own statements took on the site's database, by tier.",
    tier="none",
    section="exporter",
    labels=("tier",),
    meaning="Time the exporter's own statements took, measured by the exporter from "
    'sending each statement to reading its last row: `tier="hot"` for the scrape\'s '
    'queries, `tier="heavy"` for the background walk of the totals (on the replica, '
    "when one is used). Its rate is the share of one database connection the exporter "
    "keeps busy: the figure a DBA asks for.",
)
TIERS: tuple[str, ...] = ("hot", "heavy")
REPLICA_LAG = _define(
    "actionscheduler_exporter_replica_lag_seconds",
    "gauge",
    "Replication lag of the heavy tier's read replica at its last refresh.",
    tier="heavy",
    section="exporter",
    meaning="How far the heavy tier's read replica (`replica:`) was behind at the last "
    "refresh (`Seconds_Behind_Master`). Absent without a replica, or when the lag could "
    "not be read (replication stopped, not a replica, no REPLICA MONITOR privilege).",
)
REPLICA_USED = _define(
    "actionscheduler_exporter_replica_used",
    "gauge",
    "1 when the heavy tier's last refresh read the replica, 0 when it fell back.",
    tier="heavy",
    section="exporter",
    meaning="1 when the last refresh of the heavy tier read the read replica, 0 when the "
    "replica was down or lagged more than `max_lag` and the refresh fell back to the "
    "primary (or, with `fallback: none`, kept the last totals). Absent without a replica.",
)
USER_CAN_WRITE = _define(
    "actionscheduler_exporter_database_user_can_write",
    "gauge",
    "1 when SHOW GRANTS gives the exporter's database user a writing privilege on the "
    "site's database: it should have SELECT on the four tables only.",
    tier="hot",
    section="exporter",
    meaning="1 when `SHOW GRANTS` gives the exporter's database user a writing privilege "
    "(INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, ALL...) on every database or on the "
    "site's; a warning is logged at each connection too. The exporter never writes and its "
    "session is read-only, but such a user is a needless risk. Absent while the site's "
    "database cannot be reached.",
)
SCRAPE_DURATION = _define(
    "actionscheduler_exporter_scrape_duration_seconds",
    "gauge",
    "Time the last round of queries for the site took.",
    tier="hot",
    section="exporter",
    meaning="Time the site's whole round of queries took.",
)
ERRORS = _define(
    "actionscheduler_exporter_errors",
    "counter",
    "Errors met while collecting the site's metrics, by kind.",
    tier="none",
    section="exporter",
    labels=("kind",),
    meaning="Errors since the exporter started: `connect` (cannot connect or lost the "
    "connection), `query` (a statement failed), `timeout` (a statement hit the query "
    "timeout), `lock` (a statement waited longer than half the query timeout for a table "
    "lock: a `LOCK TABLES`, a backup, an `ALTER TABLE`; the site's other collectors are "
    "skipped for that round), `missing_table`, `deadline` (the scrape's time ran out before "
    "the round read the site), `malformed` (an answer that cannot be one: a NULL where the "
    "schema has none, as a killed statement can return, or a value of the wrong type; only "
    "the collector that read it fails). Every kind starts at 0.",
)
BUILD_INFO = _define(
    "actionscheduler_exporter_build",
    "info",
    "The exporter's version and the Python it runs on (no site label).",
    tier="none",
    section="exporter",
    labels=("version", "python_version"),
    meaning="Always 1. Has no `site` label.",
)
CONFIG_LAST_RELOAD_SUCCESSFUL = _define(
    "actionscheduler_exporter_config_last_reload_successful",
    "gauge",
    "1 when the last reload of the configuration (SIGHUP) applied, 0 when it was refused "
    "and the previous configuration kept serving (no site label).",
    tier="none",
    section="exporter",
    meaning="1 when the last reload of the configuration and the web configuration "
    "(SIGHUP) applied in full, 0 when it was refused (the reason is in the log) and the "
    "previous configuration keeps serving. 1 from the start until a reload fails. Has no "
    "`site` label; the name is the one Prometheus and Alertmanager use.",
)
CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP = _define(
    "actionscheduler_exporter_config_last_reload_success_timestamp_seconds",
    "gauge",
    "Unix time of the last configuration load that applied: the start, or the last "
    "successful reload (no site label).",
    tier="none",
    section="exporter",
    meaning="Unix time of the last load of the configuration that applied: the start, or "
    "the last reload that succeeded. Has no `site` label.",
)

ALL: tuple[MetricDef, ...] = tuple(_DEFINED)
# Families that are native histograms only: the protobuf exposition writes them, the text
# formats (which have no native histograms) leave them out.
NATIVE_ONLY: frozenset[MetricDef] = frozenset({START_DELAY_BY_HOOK})

# Error kinds are initialised at 0 so that rate() works from the first failure on.
ERROR_KINDS: tuple[str, ...] = (
    "connect",
    "query",
    "timeout",
    "lock",
    "missing_table",
    "deadline",
    "malformed",
)
KUBERNETES_ERROR_KINDS: tuple[str, ...] = (
    "config",
    "connect",
    "timeout",
    "unauthorized",
    "forbidden",
    "not_found",
    "http",
    "malformed",
)
FAILURE_REASONS: tuple[str, ...] = ("exception", "timeout", "fatal", "no_callback", "unknown")
# The runner label's fixed set: Action Scheduler's own contexts, everything else "other".
RUNNERS: dict[str, str] = {
    "WP CLI": "wp_cli",
    "WP Cron": "wp_cron",
    "Async Request": "async_request",
    "Admin List Table": "admin_list_table",
}
RUNNER_LABELS: tuple[str, ...] = (*RUNNERS.values(), OTHER)
# Runners that are web requests: on a site with dedicated workers, none should run.
WEB_RUNNERS: tuple[str, ...] = ("wp_cron", "async_request")
OUTCOMES: tuple[str, ...] = ("completed", "failed")
STOP_REASONS: tuple[str, ...] = ("consistently_failing", "next_instance_failed", "unknown")

# Labels that Prometheus, or the Prometheus Operator for a ServiceMonitor or PodMonitor,
# set on every series of a target: the exporter's own series never use them.
TARGET_LABELS = frozenset(
    {"job", "instance", "namespace", "pod", "container", "service", "endpoint"}
)
# Label names the exporter's own series use, so a site's constant label may not take them.
RESERVED_LABELS = frozenset(
    {"site", "le", *TARGET_LABELS, *(label for metric in ALL for label in metric.labels)}
)
