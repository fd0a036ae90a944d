"""Writes a scrape's samples in the Prometheus text format or OpenMetrics, directly.

prometheus-client's encoders validate and escape every label of every sample on every
scrape (what that cost: docs/performance.md). Here the same output
is written from the catalog's definitions, and each label set is escaped once: the sets
repeat from scrape to scrape (sites, hooks, groups), their values change. The tests parse
both formats with prometheus-client's parsers and compare them with its own encoders.
The process's own metrics (CPU, memory, file descriptors: `exposition.process`) are
written here too, so there is one path for every format.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

from prometheus_client.utils import floatToGoString

from actionscheduler_exporter.exposition.family_parts import SITES_PER_JOIN, given_out, join_pending
from actionscheduler_exporter.exposition.process import ProcessSample
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels
from actionscheduler_exporter.rounds.result import SiteResult

# Go's formatting of floats (+Inf, 1e+06...), as Prometheus writes and reads them.
_go_number = cast(Callable[[float], str], floatToGoString)


# The small whole numbers most samples are (counts, flags, zero), written once: four in
# five of a thousand quiet stores' values, found in a third of the time repr takes.
_WHOLE = {float(n): repr(float(n)) for n in range(1024)}


def _number(value: float) -> str:
    """Go's formatting; below a million (every count and age but the largest) it is
    Python's repr, without the checks for infinities and exponents (a thousand sites'
    scrape writes a hundred thousand values). `_site_lines` has the same lines inline."""
    # An int (a bucket's count) is written as one, "8", as Go's clients write counts.
    written = _WHOLE.get(value) if type(value) is float else None
    if written is None or _negative_zero(value):  # -0.0 finds 0.0's entry
        written = repr(value) if -1e6 < value < 1e6 else _go_number(value)
    return written


def _negative_zero(value: float) -> bool:
    return value == 0 and math.copysign(1.0, value) < 0


# Up to this many sites, the text is written as one part (held once more as one text:
# a few busy stores' hundreds of kB, not sixty's megabytes).
ONE_PART_SITES = 8

_TEXT_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "info": "gauge"}


def encode(
    results: Sequence[SiteResult],
    definitions: Iterable[MetricDef],
    extra: Iterable[tuple[MetricDef, Labels, float]],
    *,
    openmetrics: bool,
) -> bytes:
    """The whole exposition of `families`, at once (`render`, for tests)."""
    return b"".join(families(results, definitions, extra, openmetrics=openmetrics))


def families(
    results: Sequence[SiteResult],
    definitions: Iterable[MetricDef],
    extra: Iterable[tuple[MetricDef, Labels, float]],
    *,
    openmetrics: bool,
) -> Iterator[bytes]:
    """Each family's text in the catalog's order, with its HELP and TYPE, then the
    samples of every site; `extra` are samples without a site (build info). UTF-8.

    One pass over the samples makes each line into its family's list (after the site's
    label text, made once per site); every `SITES_PER_JOIN` sites each family's new
    lines are joined into one part, given out in turn once every site is written
    (`family_parts`). Written family by family over every site instead, nothing would
    be held, but finding each family's samples in each site's list cost a fleet of
    stores that differ 46 to 66 % more writing."""
    texts: dict[str, list[bytes]] = {}  # per family, its lines joined so far
    lines: dict[str, list[str]] = {}  # per family, its lines not joined yet
    keep = KEPT_LINES
    # A few sites are written as one part: their answer is sent whole, and a part per
    # family was a tenth of one store's scrape outside the database.
    whole = len(results) <= ONE_PART_SITES
    for index, result in enumerate(results, 1):
        keep = _site_lines(result, lines, keep)
        if not whole and index % SITES_PER_JOIN == 0:
            join_pending(lines, texts, _encoded)
    for metric, extra_labels, value in extra:
        written = _pairs(extra_labels)
        labels = "{" + written + "}" if written else ""
        lines.setdefault(metric.name, []).append(f"{metric.sample_name}{labels} {_number(value)}\n")
    if whole:
        yield _one_part(lines, definitions, openmetrics)
        return
    join_pending(lines, texts, _encoded)
    for metric in definitions:
        family = texts.pop(metric.name, None)
        if family:
            yield from given_out(_header(metric, openmetrics).encode(), family)


def _one_part(
    lines: dict[str, list[str]], definitions: Iterable[MetricDef], openmetrics: bool
) -> bytes:
    """Every family's head and lines, in the definitions' order, as one text."""
    written: list[str] = []
    for metric in definitions:
        family = lines.get(metric.name)
        if family:
            written.append(_header(metric, openmetrics))
            written += family
    return "".join(written).encode()


def _encoded(lines: list[str]) -> bytes:
    return "".join(lines).encode()


_NOWHERE: list[str] = []  # never appended to: every sample has a family
# Lines a scrape keeps on their samples (`Sample.written`), about 190 bytes each: a store's
# samples are nine in ten the same objects from scrape to scrape (a quiet store writes
# 190 lines, the 10M store 290, a busy one 880). A thousand stores' lines kept held
# 27 MiB and took the exporter past its 150 MB, and 20,000 of them still 10 MiB more of
# its memory (held among the scrape's passing objects): a few dozen stores' lines are
# kept, a thousand stores' are written anew.
KEPT_LINES = 5_000


def _site_lines(result: SiteResult, families: dict[str, list[str]], keep: int) -> int:
    """Adds a site's lines to their families' lists; `keep`: how many more lines the
    scrape may keep on their samples, returned less those this site's keep. The hot loop
    of a large scrape: a family's list is looked up once for a run of its samples (a
    site's samples come family by family), the number is formatted inline (`_number`),
    and 4 in 5 values are small whole numbers written once in `_WHOLE`. A sample written
    for the same site before is marked, and the second time keeps its line
    (`Sample.written`): the heavy tier's samples and the cached readings' are the same
    objects from scrape to scrape, a sample made anew is marked once and let go of. Past
    the bound, a kept line is let go of too: the lines kept at the end of a scrape are at
    most `KEPT_LINES`, whichever sites' samples were made anew meanwhile."""
    site_pairs = _site_pairs(result.label, result.labels)
    bare, labelled = site_pairs + "} ", site_pairs + ","
    whole, label_texts, copysign = _WHOLE, _LABEL_TEXTS, math.copysign
    last: MetricDef | None = None
    append = _NOWHERE.append  # the first sample's family's
    sample_name = ""
    for item in result.samples:
        metric = item.metric
        if metric is not last:
            last, sample_name = metric, metric.sample_name
            found = families.get(metric.name)
            if found is None:
                found = families[metric.name] = []
            append = found.append
        written = item.written
        if written is not None and type(written) is tuple:
            if keep > 0 and written[0] is site_pairs:
                append(written[1])
                keep -= 1
                continue
            item.written = written = None
        value = item.value
        number = whole.get(value) if type(value) is float else None
        # -0.0 finds 0.0's entry: a fifth of the values are zeros, tested inline.
        if number is None or (not value and copysign(1.0, value) < 0):
            number = repr(value) if -1e6 < value < 1e6 else _go_number(value)
        labels = item.labels
        if labels:
            text = label_texts.get(labels)
            if text is None:
                text = _label_text(labels)
            line = f"{sample_name}{item.suffix}{labelled}{text}}} {number}\n"
        else:
            line = f"{sample_name}{item.suffix}{bare}{number}\n"
        append(line)
        if keep > 0:  # past the bound, no sample is marked: none would keep its line
            if written is site_pairs:
                item.written = (site_pairs, line)
                keep -= 1
            else:
                item.written = site_pairs
    return keep


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


# Each label set's text, by the set, for the hot loop: a dict's lookup, where the cache of
# `_pairs` made a key per call (a tenth of a thousand stores' writing: 131 against 117 ms).
# Bounded as the shared label sets are (`metrics.samples`): hook and group names are data;
# past the bound a set's text comes from `_pairs`.
_LABEL_TEXTS: dict[Labels, str] = {}
MAX_LABEL_TEXTS = 65_536


def _label_text(labels: Labels) -> str:
    text = _pairs(labels)
    if len(_LABEL_TEXTS) < MAX_LABEL_TEXTS:
        _LABEL_TEXTS[labels] = text
    return text


@functools.lru_cache(maxsize=65_536)
def _pairs(labels: Labels) -> str:
    """`a="x",b="y"`, names in order, values escaped. A site's labels and a sample's own are
    written apart, each set once: a thousand sites times their samples' label sets would
    not stay in any cache."""
    return ",".join(f'{name}="{_escape(value, quote=True)}"' for name, value in sorted(labels))


def _escape(text: str, *, quote: bool) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


def encode_process(samples: Iterable[ProcessSample], *, openmetrics: bool) -> str:
    """The process's own metrics, each a family of one sample without labels."""
    return "".join(
        # The text format names a counter's family by its sample, OpenMetrics does not.
        _process_header(item.name if openmetrics else item.sample_name, item.help, item.kind,
                        openmetrics)
        + f"{item.sample_name} {_number(item.value)}\n"
        for item in samples
    )  # fmt: skip


@functools.lru_cache(maxsize=32)
def _process_header(name: str, help_text: str, kind: str, openmetrics: bool) -> str:
    return f"# HELP {name} {_escape(help_text, quote=openmetrics)}\n# TYPE {name} {kind}\n"
