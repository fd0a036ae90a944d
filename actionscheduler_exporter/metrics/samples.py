"""The sample model: what every source returns and the exposition writes."""

from __future__ import annotations

from dataclasses import dataclass

from actionscheduler_exporter.metrics.catalog import MetricDef

Labels = tuple[tuple[str, str], ...]


# Slots: a scrape of a thousand sites builds a couple of hundred thousand samples. Not
# frozen, which would make each in two and a half times the time (`object.__setattr__`
# per field): what a sample is (its metric, value, labels and suffix) never changes once
# made, and it hashes by that.
@dataclass(slots=True, unsafe_hash=True)
class Sample:
    metric: MetricDef
    value: float
    labels: Labels = ()
    suffix: str = ""  # _bucket, _sum or _count for histograms

    @property
    def name(self) -> str:
        return self.metric.sample_name + self.suffix


# Label sets shared by every sample that has them: a thousand sites' samples are mostly
# the same few sets (a status, a group, a collector's name), and each sample made its own
# tuples (19 MiB of a thousand databases' 78 MiB of live objects). Bounded, as the label
# texts are (`db.schema.label_value`): hook and group names are data.
_SHARED_LABELS: dict[Labels, Labels] = {}
MAX_SHARED_LABELS = 50_000


# The small whole numbers most values are (counts, flags, zero), one float each: a
# thousand stores hold 120,000 samples of them, each with a float of its own (2.7 MiB).
# Keyed by int, found by any number equal to one (3, 3.0, True; -0.0 finds 0.0).
_WHOLE_VALUES: dict[float, float] = {number: float(number) for number in range(1024)}


def value_of(value: float | int | None) -> float:
    """A sample's value: the number as a float (None as 0.0), shared when it is a small
    whole one."""
    number = value or 0
    shared = _WHOLE_VALUES.get(number)
    return float(number) if shared is None else shared


# Samples of small whole numbers, by metric, labels and value: the same object for every
# store and scrape with that count. Bounded (a few MB at most): past the bound a sample is
# made each time.
_WHOLE_SAMPLES: dict[tuple[MetricDef, Labels, float | int | None], Sample] = {}
MAX_WHOLE_SAMPLES = 20_000


def whole_sample(metric: MetricDef, value: float | int | None, labels: Labels = ()) -> Sample:
    """`Sample(metric, value_of(value), labels)`, made once when the value is a small
    whole number: a store's counts mostly stay the same from scrape to scrape, and a
    sample that is the same object as at the last scrape is not compared again nor
    written again (`exposition.kept_texts`). `labels` as `labels_of` gives them."""
    key = (metric, labels, value)
    found = _WHOLE_SAMPLES.get(key)
    if found is not None:
        return found
    made = Sample(metric, value_of(value), labels)
    # `value_of` gives a small whole number as its shared float: only those are kept.
    if made.value is _WHOLE_VALUES.get(made.value) and len(_WHOLE_SAMPLES) < MAX_WHOLE_SAMPLES:
        _WHOLE_SAMPLES[key] = made
    return made


def sample(metric: MetricDef, value: float | int | None, **labels: str) -> Sample:
    """A sample with its labels in the order the metric definition declares them; a label
    the definition does not declare, or one it declares and is missing, is a bug: raised,
    as client_python does, rather than dropped."""
    # The common case in one pass (a thousand sites' scrape builds a couple of hundred
    # thousand samples): as many labels as declared, and each declared one given.
    names = metric.labels
    if not names and not labels:
        return Sample(metric, value_of(value))
    if len(labels) == len(names):
        try:
            made = tuple([(name, labels[name]) for name in names])
        except KeyError:
            pass
        else:
            shared = _SHARED_LABELS.get(made)
            if shared is None:
                shared = made
                if len(_SHARED_LABELS) < MAX_SHARED_LABELS:
                    _SHARED_LABELS[made] = made
            return Sample(metric, value_of(value), shared)
    unknown = sorted(labels.keys() - set(names))
    missing = sorted(set(names) - labels.keys())
    raise ValueError(
        f"{metric.name}: labels {unknown} are not declared, {missing} are missing "
        f"(declared: {list(names)})"
    )


def labels_of(metric: MetricDef, **labels: str) -> Labels:
    """The label set `sample` gives the metric's samples with these labels, shared and
    checked as there: for a caller that makes many samples of one set (a source's health,
    a counter's kinds) and builds them as `Sample(metric, value, labels)`."""
    return sample(metric, 0, **labels).labels
