"""One exporter kept across scrapes, as a running exporter is, for tests that follow a
store's history step by step."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator
from tests.support.clock import FakeClock

Follow = Callable[..., "Follower"]


class Follower:
    """One exporter (a Coordinator) kept across scrapes, as a running exporter is."""

    def __init__(self, site: SiteConfig) -> None:
        self.clock = FakeClock()  # the cursor's gap grace runs on it
        self.coordinator = Coordinator(ExporterConfig(sites=(site,)), clock=self.clock)
        self.last: SiteResult | None = None

    def scrape(self) -> SiteResult:
        (result,) = self.coordinator.scrape(30)
        assert result.up, result.problems
        assert result.value(catalog.COLLECTOR_SUCCESS.name, collector="log_events") == 1
        self.last = result
        return result

    def total(self, metric: MetricDef, **labels: str) -> float:
        """Sum of the metric's samples whose labels include `labels`."""
        assert self.last is not None
        return sum(
            item.value
            for item in self.last.samples
            if item.metric is metric
            and item.suffix in ("", "_count")
            and labels.items() <= dict(item.labels).items()
        )

    def buckets(self, metric: MetricDef, **labels: str) -> dict[str, float]:
        assert self.last is not None
        return {
            dict(item.labels)["le"]: item.value
            for item in self.last.samples
            if item.metric is metric
            and item.suffix == "_bucket"
            and labels.items() <= dict(item.labels).items()
        }

    def close(self) -> None:
        self.coordinator.close()


def following(site: Callable[..., SiteConfig]) -> Iterator[Follow]:
    """The `follow` fixture's body: followers made with the site factory, closed after."""
    followers: list[Follower] = []

    def make(**overrides: object) -> Follower:
        follower = Follower(site(**overrides))
        followers.append(follower)
        return follower

    yield make
    for follower in followers:
        follower.close()
