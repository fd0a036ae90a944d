"""One round of a `MonitoredSite` read to its results, on the test's clock."""

from __future__ import annotations

from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.timing import Clock, Deadline


def read_round(site: MonitoredSite, clock: Clock, seconds: float = 10) -> list[SiteResult]:
    """Runs a round that may read for `seconds` (negative: its deadline has passed) and
    returns its results at once."""
    reports = site.run(Deadline(clock() + seconds, clock))
    return site.finish(reports, Deadline(clock(), clock))
