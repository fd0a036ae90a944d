"""Every producer of a site's samples, one module per group of metric families, and the
one list of them (`site_sources`) that the rounds and the tests use."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actionscheduler_exporter.collectors.claims import ClaimsCollector
from actionscheduler_exporter.collectors.due import DueCollector
from actionscheduler_exporter.collectors.due_split import DueSplitCollector
from actionscheduler_exporter.collectors.failures import FailuresCollector
from actionscheduler_exporter.collectors.in_progress import InProgressCollector
from actionscheduler_exporter.collectors.log_events.collector import LogEventsCollector
from actionscheduler_exporter.collectors.recurring import RecurringCollector
from actionscheduler_exporter.collectors.retention import RetentionCollector
from actionscheduler_exporter.collectors.settings import SiteSettings
from actionscheduler_exporter.collectors.status import StatusCollector
from actionscheduler_exporter.collectors.tables import TablesCollector
from actionscheduler_exporter.collectors.workers import KubernetesWorkers
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.sources.database import Collector
from actionscheduler_exporter.sources.source import Source
from actionscheduler_exporter.timing import Clock


@dataclass(frozen=True)
class SiteSources:
    """A site's sources: those read per table prefix, and those read once for the whole
    site with the context each reads (the settings read the configuration; the Kubernetes
    workers, the API)."""

    site: SiteConfig
    database: tuple[Collector, ...]
    site_wide: tuple[tuple[Source[Any], Any], ...]

    @property
    def in_round(self) -> tuple[Collector, ...]:
        """The database collectors read inside each round, in the order they run."""
        return tuple(c for c in self.database if not c.freshness(self.site).background)

    @property
    def background(self) -> tuple[Collector, ...]:
        """The database collectors the heavy tier refreshes in the background."""
        return tuple(c for c in self.database if c.freshness(self.site).background)

    def without_heavy(self) -> SiteSources:
        """These sources less the heavy collectors (a round with no background refresh:
        the fast tier, the recorded hot statements)."""
        hot = tuple(c for c in self.database if c.tier == "hot")
        return dataclasses.replace(self, database=hot)

    def all(self) -> tuple[Source[Any], ...]:
        return (*self.database, *(source for source, _ in self.site_wide))


def site_sources(
    site: SiteConfig, clock: Clock = time.monotonic, extra: Sequence[Collector] = ()
) -> SiteSources:
    """Every source of the site, in the order a round reads them: the autoscaling signal
    first. `extra`: collectors added after the exporter's own (tests, plugins)."""
    database: tuple[Collector, ...] = (
        DueCollector(),
        DueSplitCollector(),
        InProgressCollector(),
        ClaimsCollector(),
        StatusCollector(),
        FailuresCollector(),
        RecurringCollector(),
        RetentionCollector(),
        TablesCollector(),
        *extra,
        LogEventsCollector(site, clock),
    )
    site_wide: list[tuple[Source[Any], Any]] = [(SiteSettings(), site)]
    if site.kubernetes is not None:
        site_wide.append((KubernetesWorkers(site.kubernetes), None))
    return SiteSources(site, database, tuple(site_wide))


__all__ = ["Collector", "SiteSources", "site_sources"]
