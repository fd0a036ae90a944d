"""What one round of queries found out about one site."""

from __future__ import annotations

from dataclasses import dataclass, field

from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Labels, Sample, sample


@dataclass
class SiteResult:
    label: str  # the value of its `site` label (`name`, or `name:prefix` for a subsite)
    labels: Labels  # the site's constant labels
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


def down(label: str, labels: Labels, problem: str) -> SiteResult:
    """A site reported as down with `problem`, without reading it."""
    result = SiteResult(label, labels, up=False, problems=[problem])
    result.samples.append(sample(catalog.UP, False))
    return result
