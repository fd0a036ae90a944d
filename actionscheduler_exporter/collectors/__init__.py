"""Every producer of a site's samples, one module per group of metric families, and the
one list of them (`site_sources`) that the rounds and the tests use."""

from __future__ import annotations

import time

from actionscheduler_exporter.collectors.anomalies import AnomaliesCollector
from actionscheduler_exporter.collectors.claims import ClaimsCollector
from actionscheduler_exporter.collectors.due import DueCollector
from actionscheduler_exporter.collectors.due_split import DueSplitCollector
from actionscheduler_exporter.collectors.failures import FailuresCollector
from actionscheduler_exporter.collectors.in_progress import InProgressCollector
from actionscheduler_exporter.collectors.log_events.collector import LogEventsCollector
from actionscheduler_exporter.collectors.recurring import RecurringCollector
from actionscheduler_exporter.collectors.retention import RetentionCollector
from actionscheduler_exporter.collectors.site_wide_sources import site_wide_sources
from actionscheduler_exporter.collectors.status import StatusCollector
from actionscheduler_exporter.collectors.tables import TablesCollector
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.sources.site_sources import SiteSources
from actionscheduler_exporter.timing import Clock


def site_sources(site: SiteConfig, clock: Clock = time.monotonic) -> SiteSources:
    """Every source of the site, in the order a round reads them: the autoscaling signal
    first."""
    database = (
        DueCollector(),
        DueSplitCollector(clock),
        InProgressCollector(),
        ClaimsCollector(),
        AnomaliesCollector(),
        StatusCollector(),
        FailuresCollector(),
        RecurringCollector(),
        RetentionCollector(),
        TablesCollector(),
        LogEventsCollector(site, clock),
    )
    return SiteSources(site, database, site_wide_sources(site))


__all__ = ["SiteSources", "site_sources"]
