"""The sample model: what every source returns and the exposition writes."""

from __future__ import annotations

from dataclasses import dataclass

from actionscheduler_exporter.metrics.catalog import MetricDef

Labels = tuple[tuple[str, str], ...]


# Slots: a scrape of a thousand sites builds a couple of hundred thousand samples. Not
# frozen, which would make each in two and a half times the time (`object.__setattr__`
# per field): a sample is never changed once made, and hashes by its fields.
@dataclass(slots=True, unsafe_hash=True)
class Sample:
    metric: MetricDef
    value: float
    labels: Labels = ()
    suffix: str = ""  # _bucket, _sum or _count for histograms

    @property
    def name(self) -> str:
        return self.metric.sample_name + self.suffix


def sample(metric: MetricDef, value: float | int | None, **labels: str) -> Sample:
    """A sample with its labels in the order the metric definition declares them; a label
    the definition does not declare, or one it declares and is missing, is a bug: raised,
    as client_python does, rather than dropped."""
    # The common case in one pass (a thousand sites' scrape builds a couple of hundred
    # thousand samples): as many labels as declared, and each declared one given.
    names = metric.labels
    if len(labels) == len(names):
        try:
            return Sample(
                metric, float(value or 0), tuple([(name, labels[name]) for name in names])
            )
        except KeyError:
            pass
    unknown = sorted(labels.keys() - set(names))
    missing = sorted(set(names) - labels.keys())
    raise ValueError(
        f"{metric.name}: labels {unknown} are not declared, {missing} are missing "
        f"(declared: {list(names)})"
    )
