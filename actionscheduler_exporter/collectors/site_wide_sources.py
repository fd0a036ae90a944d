"""The sources of a site that read no table of it: its configured settings, and its
workers in Kubernetes when it has some."""

from __future__ import annotations

from actionscheduler_exporter.collectors.settings import SiteSettings
from actionscheduler_exporter.collectors.workers import KubernetesWorkers
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.sources.site_sources import SiteWide


def site_wide_sources(site: SiteConfig) -> tuple[SiteWide, ...]:
    site_wide: list[SiteWide] = [(SiteSettings(), site)]
    if site.kubernetes is not None:
        site_wide.append((KubernetesWorkers(site.kubernetes), None))
    return tuple(site_wide)
