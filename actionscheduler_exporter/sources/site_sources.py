"""The sources of one site, as `collectors.site_sources` lists them: the one list the
rounds and the tests read."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.sources.database import Collector
from actionscheduler_exporter.sources.source import Source

# A source read once for the whole site, with the context it reads.
SiteWide = tuple[Source[Any], Any]


@dataclass(frozen=True)
class SiteSources:
    """A site's sources: those read per table prefix, and those read once for the whole
    site with the context each reads (the settings read the configuration; the Kubernetes
    workers, the API)."""

    site: SiteConfig
    database: tuple[Collector, ...]
    site_wide: tuple[SiteWide, ...]

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

    def adding(self, collectors: Sequence[Collector]) -> SiteSources:
        """These sources and `collectors`, read after the database collectors of the
        exporter's own but the log events collector (tests, plugins)."""
        *own, log = self.database
        return dataclasses.replace(self, database=(*own, *collectors, log))

    def all(self) -> tuple[Source[Any], ...]:
        return (*self.database, *(source for source, _ in self.site_wide))
