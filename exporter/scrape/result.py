"""What one round of queries found out about one site."""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter import catalog
from exporter.collectors.base import Collector, Labels, Sample, sample


@dataclass
class SiteResult:
    site: str
    labels: Labels
    up: bool
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def value(self, metric_name: str, **labels: str) -> float | None:
        """The value of one sample, for the check command and tests."""
        wanted = tuple(sorted(labels.items()))
        for item in self.samples:
            if item.metric.name == metric_name and tuple(sorted(item.labels)) == wanted:
                return item.value
        return None


def collector_samples(
    collector: Collector | type[Collector], ok: bool, duration: float
) -> list[Sample]:
    """Whether a collector's queries succeeded the last time they ran, and how long they took."""
    return [
        sample(catalog.COLLECTOR_SUCCESS, ok, collector=collector.name),
        sample(catalog.COLLECTOR_DURATION, duration, collector=collector.name),
    ]
