"""The site's configuration that rules and dashboards compare the queue with."""

from __future__ import annotations

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.source import CONSTANT, Freshness, Source


class SiteSettings(Source[SiteConfig]):
    """Thresholds, limits and where the workers run: constant for the exporter's life."""

    name = "settings"
    metrics = (
        catalog.TIMEOUT_PERIOD,
        catalog.HEAVY_INTERVAL,
        catalog.THRESHOLD_OLDEST_DUE_WARNING,
        catalog.THRESHOLD_OLDEST_DUE_CRITICAL,
        catalog.THRESHOLD_GROUP_OLDEST_DUE_WARNING,
        catalog.THRESHOLD_GROUP_OLDEST_DUE_CRITICAL,
        catalog.THRESHOLD_DRAIN_TARGET,
        catalog.THRESHOLD_FAILURE_RATIO,
        catalog.THRESHOLD_FAILURE_RATE,
        catalog.THRESHOLD_RESTARTS,
        catalog.CONCURRENT_BATCHES_LIMIT,
        catalog.DEDICATED_WORKERS,
        catalog.WORKER_INFO,
    )

    def freshness(self, site: SiteConfig) -> Freshness:
        return CONSTANT

    def read(self, context: SiteConfig) -> list[Sample]:
        alerts = context.alerts
        samples = [
            sample(catalog.TIMEOUT_PERIOD, context.timeout_period),
            sample(catalog.HEAVY_INTERVAL, context.heavy_interval),
            sample(catalog.THRESHOLD_OLDEST_DUE_WARNING, alerts.oldest_due_warning),
            sample(catalog.THRESHOLD_OLDEST_DUE_CRITICAL, alerts.oldest_due_critical),
            sample(catalog.THRESHOLD_DRAIN_TARGET, alerts.drain_target),
            sample(catalog.THRESHOLD_FAILURE_RATIO, alerts.failure_ratio),
            sample(catalog.THRESHOLD_FAILURE_RATE, alerts.failure_rate),
            sample(catalog.THRESHOLD_RESTARTS, alerts.restarts),
            sample(catalog.DEDICATED_WORKERS, int(context.runs_dedicated_workers)),
        ]
        for group, (warning, critical) in sorted(context.group_thresholds().items()):
            samples.append(sample(catalog.THRESHOLD_GROUP_OLDEST_DUE_WARNING, warning, group=group))
            samples.append(
                sample(catalog.THRESHOLD_GROUP_OLDEST_DUE_CRITICAL, critical, group=group)
            )
        if context.concurrent_batches_limit is not None:
            samples.append(
                sample(catalog.CONCURRENT_BATCHES_LIMIT, context.concurrent_batches_limit)
            )
        for workers in context.workers:
            samples.append(
                sample(
                    catalog.WORKER_INFO,
                    1,
                    worker_namespace=workers.namespace,
                    deployment=workers.deployment,
                    worker_container=workers.container,
                    horizontalpodautoscaler=workers.hpa,
                    runs=workers.runs,
                )
            )
        return samples
