"""The validated configuration: plain immutable data, no parsing here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from actionscheduler_exporter.sharding import ALL_SITES, Shard

AUTO_PREFIX = "auto"
AUTO_DATABASE = "auto"
DEFAULT_PORT = 9966


@dataclass(frozen=True)
class TLSConfig:
    ca_file: str | None = None
    verify: bool = True
    cert_file: str | None = None
    key_file: str | None = None

    @property
    def enabled(self) -> bool:
        return self.ca_file is not None or self.cert_file is not None


@dataclass(frozen=True)
class AlertThresholds:
    """Per-site thresholds the alerting rules compare with (exported as metrics), so that
    one site can be tuned without editing the rules."""

    oldest_due_warning: float = 900.0  # 15 minutes: a webhook or e-mail is late
    oldest_due_critical: float = 86400.0  # Action Scheduler's own past-due notice: a day
    drain_target: float = 3600.0  # the backlog should drain within an hour
    failure_ratio: float = 0.1  # a tenth of a hook's runs fail
    failure_rate: float = 0.1  # failures per second of one hook (6 a minute)
    restarts: float = 3.0  # worker container restarts within 15 minutes


@dataclass(frozen=True)
class GroupConfig:
    """A group the site names: never folded into "other", and optionally alerted on with
    thresholds of its own (a slow export group may wait hours, a webhook group minutes)."""

    slug: str
    oldest_due_warning: float | None = None  # None: no threshold of its own
    oldest_due_critical: float | None = None

    @property
    def has_thresholds(self) -> bool:
        return self.oldest_due_warning is not None or self.oldest_due_critical is not None


@dataclass(frozen=True)
class WorkersConfig:
    """Where the site's queue workers run in Kubernetes, for joining kube-state-metrics."""

    namespace: str
    deployment: str
    container: str = "worker"
    horizontalpodautoscaler: str = ""  # default: keda-hpa-<deployment>, as KEDA names it
    runs: str = ""  # what a pool of dedicated runners runs ("group reports"); "": everything

    @property
    def hpa(self) -> str:
        return self.horizontalpodautoscaler or f"keda-hpa-{self.deployment}"


@dataclass(frozen=True)
class KubernetesConfig:
    """The site's worker pods, read from the Kubernetes API (optional, off by default)."""

    namespace: str
    selector: str  # a label selector of the worker pods, e.g. app=shop-worker
    container: str = "worker"
    deployment: str = ""
    horizontalpodautoscaler: str = ""
    cache: float = 15.0  # seconds a reading is reused: at most one set of calls per period
    timeout: float = 5.0  # per API call
    kubeconfig: str | None = None  # default: in-cluster service account


# Where to connect and as whom: what a replica has of its own.
CONNECTION_FIELDS = ("host", "port", "user", "password", "unix_socket", "tls")


@dataclass(frozen=True)
class ReplicaConfig:
    """A read replica for the heavy tier: the database's name and the site's other
    settings stay those of the site; only where to connect, and as whom, differ."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    unix_socket: str | None = None
    tls: TLSConfig = TLSConfig()
    # Above this lag the replica's totals are too old: the refresh reads the primary.
    max_lag: float = 300.0
    # What a refresh does when the replica is down or lags: read the primary ("primary",
    # chunked and paused as always) or keep the last totals and report the failure ("none").
    fallback: str = "primary"


@dataclass(frozen=True, slots=True)
class SiteConfig:
    """One configured site: a database and a table prefix (or `auto`)."""

    name: str
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    database: str = ""
    unix_socket: str | None = None
    table_prefix: str = "wp_"
    tls: TLSConfig = TLSConfig()
    labels: tuple[tuple[str, str], ...] = ()
    concurrent_batches_limit: int | None = None
    query_timeout: float = 5.0
    timeout_period: float = 300.0
    top_hooks: int = 20
    top_groups: int = 20
    log_rows_per_scrape: int = 10_000
    log_gap_grace: float = 30.0
    # The heavy tier (totals over all actions) is re-read at most this often, in the
    # background; 0 runs it inside every scrape instead.
    heavy_interval: float = 300.0
    heavy_query_timeout: float = 60.0
    # database: auto: the databases whose name matches this LIKE pattern, listed this often.
    database_pattern: str = "%"
    discovery_interval: float = 60.0
    # Ids per statement of the heavy tier's walk (see totals/ledger.py).
    heavy_chunk_rows: int = 20_000
    # Chunks of finished actions only (changed by nothing but a purge) are checked at
    # every Nth refresh: 1 keeps every total exact within one refresh; 2 checks them half
    # as often (a purge shows within two refreshes) for about a third less database time.
    heavy_settled_check_every: int = 1
    replica: ReplicaConfig | None = None
    # The due backlog split by group and hook reads at most this many of the oldest due
    # actions per scrape (0: no split); a larger backlog's rest is reported unsplit.
    due_split_rows: int = 10_000
    # ... re-read at most this often (0: every scrape), each prefix at its own point of it
    # (what that saves a thousand subsites' scrape: docs/performance.md); past it, a
    # backlog that has not moved is renewed without a statement (collectors/due_split.py).
    due_split_interval: float = 30.0
    # Orphaned claims, stale claimed actions and undated pending actions are read at most
    # this often (0: every scrape), each prefix at its own point of it (collectors/anomalies.py).
    anomalies_interval: float = 60.0
    # Groups and hooks named here are always their own series (worker pools scale on them).
    groups: tuple[GroupConfig, ...] = ()
    hooks: tuple[str, ...] = ()
    alerts: AlertThresholds = AlertThresholds()
    # Where the site's workers run: one entry per Deployment (a pool of runners each).
    workers: tuple[WorkersConfig, ...] = ()
    kubernetes: KubernetesConfig | None = None
    # Only `wp action-scheduler run` workers run the queue (the must-use plugin turns the
    # web runners off); None: true when `workers` is set.
    dedicated_workers: bool | None = None
    # The protobuf exposition writes the classic buckets beside each native histogram
    # (rules and dashboards on `_bucket` keep working while they migrate); the text
    # formats always have them.
    classic_histograms: bool = True

    def group_thresholds(self) -> dict[str, tuple[float, float]]:
        """(warning, critical) per group with thresholds of its own; a threshold the group
        leaves out is the site's."""
        return {
            group.slug: (
                group.oldest_due_warning or self.alerts.oldest_due_warning,
                group.oldest_due_critical or self.alerts.oldest_due_critical,
            )
            for group in self.groups
            if group.has_thresholds
        }

    @property
    def runs_dedicated_workers(self) -> bool:
        if self.dedicated_workers is None:
            return bool(self.workers)
        return self.dedicated_workers

    @property
    def discovers_prefixes(self) -> bool:
        return self.table_prefix == AUTO_PREFIX

    @property
    def discovers_databases(self) -> bool:
        return self.database == AUTO_DATABASE

    def on_replica(self) -> SiteConfig:
        """This site's settings with the replica's connection (the heavy tier's session)."""
        replica = self.replica
        if replica is None:
            return self
        connection = {name: getattr(replica, name) for name in CONNECTION_FIELDS}
        return replace(self, **connection, replica=None)

    @property
    def endpoint(self) -> str:
        """Where the database is, for logs and the landing page (never the password)."""
        where = self.unix_socket or f"{self.host}:{self.port}"
        return f"{self.user}@{where}/{self.database}"


@dataclass(frozen=True)
class ExporterConfig:
    sites: tuple[SiteConfig, ...]
    listen_host: str = "0.0.0.0"  # noqa: S104 - an exporter serves other hosts by design
    listen_port: int = DEFAULT_PORT
    source: str = "environment"
    # The part of the sites this replica serves (--shard, --total-shards): all by default.
    shard: Shard = ALL_SITES
    # Connections to one database server, shared by all its sites and both tiers.
    connections_per_server: int = 4
    # Processes that read the sites, each a part of them with a share of the connections
    # (`split`): more than one lets a large fleet's rounds use more than one core.
    processes: int = 1
