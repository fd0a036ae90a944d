"""Writes a scrape's samples in the Prometheus text format or OpenMetrics, directly.

prometheus-client's encoders validate and escape every label of every sample on every
scrape (what that cost: docs/performance.md). Here the same output
is written from the catalog's definitions, and each label set is escaped once: the sets
repeat from scrape to scrape (sites, hooks, groups), their values change. The tests parse
both formats with prometheus-client's parsers and compare them with its own encoders.
The process's own metrics (CPU, memory, file descriptors) come from prometheus-client's
ProcessCollector and are written here too, so there is one path for every format.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import cast

from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels, Sample
from actionscheduler_exporter.rounds.result import SiteResult

# Go's formatting of floats (+Inf, 1e+06...), as Prometheus writes and reads them.
_go_number = cast(Callable[[float], str], floatToGoString)


# The small whole numbers most samples are (counts, flags, zero), written once.
_WHOLE = {float(n): repr(float(n)) for n in range(1024)}


def _number(value: float) -> str:
    """Go's formatting; below a million (every count and age but the largest) it is
    Python's repr, without the checks for infinities and exponents (a thousand sites'
    scrape writes a hundred thousand values)."""
    if type(value) is float:  # an int (a bucket's count) is written as one: "8"
        written = _WHOLE.get(value)
        if written is not None and (value or math.copysign(1.0, value) > 0):  # not -0.0
            return written
    if -1e6 < value < 1e6:
        return repr(value)
    return _go_number(value)


_TEXT_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "info": "gauge"}


def encode(
    results: Sequence[SiteResult],
    definitions: Iterable[MetricDef],
    extra: Iterable[tuple[MetricDef, Labels, float]],
    *,
    openmetrics: bool,
) -> bytes:
    """Families in the catalog's order, each with its HELP and TYPE, then the samples of
    every site; `extra` are samples without a site (build info). UTF-8.

    Written family by family: the samples are first sorted into their families (each
    site's run of them led by the site's label text), then each family's lines are made,
    joined and encoded at once. A thousand sites' scrape has some 170,000 lines: held all
    at once until the end, they spread over the interpreter's small-object memory, which
    stays the process's after the scrape."""
    families: dict[str, list[Sample | str]] = {}
    sites: dict[str, str] = {}  # the site each family's list is at
    for result in results:
        site_pairs = _site_pairs(result.label, result.labels)
        for item in result.samples:
            name = item.metric.name
            family = families.get(name)
            if family is None:
                family = families[name] = []
            if sites.get(name) is not site_pairs:
                sites[name] = site_pairs
                family.append(site_pairs)
            family.append(item)
    extras: dict[str, list[str]] = {}
    for metric, extra_labels, value in extra:
        written = _pairs(extra_labels)
        labels = "{" + written + "}" if written else ""
        extras.setdefault(metric.name, []).append(
            f"{metric.sample_name}{labels} {_number(value)}\n"
        )
    out: list[bytes] = []
    for metric in definitions:
        family = families.get(metric.name)
        lines = _lines(metric, family) if family else []
        lines += extras.get(metric.name, ())
        if lines:
            out.append((_header(metric, openmetrics) + "".join(lines)).encode())
    return b"".join(out)


def _lines(metric: MetricDef, family: list[Sample | str]) -> list[str]:
    """A family's lines: its samples, each after the label text of its site."""
    lines: list[str] = []
    append = lines.append
    base = metric.sample_name
    site_pairs = bare = ""
    for item in family:
        if isinstance(item, str):
            site_pairs, bare = item, item + "} "
            continue
        suffix = item.suffix
        name = base + suffix if suffix else base
        value = item.value
        # `_number`, inline: below a million, Go's formatting is Python's repr.
        number = repr(value) if -1e6 < value < 1e6 else _go_number(value)
        if item.labels:
            append(f"{name}{site_pairs},{_pairs(item.labels)}}} {number}\n")
        else:
            append(f"{name}{bare}{number}\n")
    return lines


@functools.lru_cache(maxsize=512)
def _header(metric: MetricDef, openmetrics: bool) -> str:
    if openmetrics:
        help_text = _escape(metric.help, quote=True)
        return f"# HELP {metric.name} {help_text}\n# TYPE {metric.name} {metric.kind}\n"
    name = metric.sample_name if metric.kind in ("counter", "info") else metric.name
    help_text = _escape(metric.help, quote=False)
    return f"# HELP {name} {help_text}\n# TYPE {name} {_TEXT_TYPES[metric.kind]}\n"


@functools.lru_cache(maxsize=65_536)
def _site_pairs(site: str, labels: Labels) -> str:
    """`{site="x",...` of a site, made once."""
    return "{" + _pairs((("site", site), *labels))


@functools.lru_cache(maxsize=65_536)
def _pairs(labels: Labels) -> str:
    """`a="x",b="y"`, names in order, values escaped. A site's labels and a sample's own are
    written apart, each set once: a thousand sites times their samples' label sets would
    not stay in any cache."""
    return ",".join(f'{name}="{_escape(value, quote=True)}"' for name, value in sorted(labels))


def _escape(text: str, *, quote: bool) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


def encode_families(families: Iterable[Metric], *, openmetrics: bool) -> str:
    """Families that prometheus-client built (the process's own metrics)."""
    out: list[str] = []
    for family in families:
        name = family.name
        if not openmetrics and family.type == "counter":
            name += "_total"  # the text format names a counter family by its sample
        kind = family.type if openmetrics else _TEXT_TYPES.get(family.type, "untyped")
        out.append(f"# HELP {name} {_escape(family.documentation, quote=openmetrics)}\n")
        out.append(f"# TYPE {name} {kind}\n")
        for item in family.samples:
            own = _pairs(tuple(item.labels.items()))
            labels = "{" + own + "}" if own else ""
            out.append(f"{item.name}{labels} {_number(item.value)}\n")
    return "".join(out)
