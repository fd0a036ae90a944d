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
from itertools import chain
from typing import cast

from prometheus_client.utils import floatToGoString

from actionscheduler_exporter.exposition.family_parts import (
    Family,
    Gathering,
    Part,
    in_parts,
)
from actionscheduler_exporter.exposition.kept_texts import KeptTexts
from actionscheduler_exporter.exposition.process import ProcessSample
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels, Sample
from actionscheduler_exporter.rounds.result import SiteResult

# Go's formatting of floats (+Inf, 1e+06...), as Prometheus writes and reads them.
_go_number = cast(Callable[[float], str], floatToGoString)


# The small whole numbers most samples are (counts, flags, zero), written once: four in
# five of a thousand quiet stores' values, found in a third of the time repr takes.
_WHOLE = {float(n): repr(float(n)) for n in range(1024)}


def _number(value: float) -> str:
    """Go's formatting; below a million (every count and age but the largest) it is
    Python's repr, without the checks for infinities and exponents (a thousand sites'
    scrape writes a hundred thousand values). `_family_text` has the same lines inline."""
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
    parts = families(results, definitions, extra, openmetrics=openmetrics)
    return b"".join(chain.from_iterable(parts))


def families(
    results: Sequence[SiteResult],
    definitions: Iterable[MetricDef],
    extra: Iterable[tuple[MetricDef, Labels, float]],
    *,
    openmetrics: bool,
) -> Iterator[Part]:
    """Each family's text in the catalog's order, with its HELP and TYPE, then the
    samples of every site; `extra` are samples without a site (build info). UTF-8.

    Each site's samples of one family are written as one text (`kept_texts.KeptTexts`),
    the texts of the last scrape taken again for the families whose samples are the
    same. Each family's texts are given out in parts of `SITES_PER_PART` sites once
    every site is written (`family_parts`). Written family by family over every site
    instead, nothing would be held, but finding each family's samples in each site's
    list cost a fleet of stores that differ 46 to 66 % more writing."""
    return written(gather(results), definitions, extra, openmetrics=openmetrics)


def written(
    gathering: Gathering,
    definitions: Iterable[MetricDef],
    extra: Iterable[tuple[MetricDef, Labels, float]],
    *,
    openmetrics: bool,
) -> Iterator[Part]:
    """`families` of sites already gathered (`gather`, `family_parts.joined`)."""
    texts, generations = gathering.families, gathering.generations
    for metric, extra_labels, value in extra:
        line = _extra_line(metric, extra_labels, _number(value))
        family = texts.setdefault(metric.name, Family())
        family.pieces.append(line)
        family.sites.append(line)  # a small piece is its own mark
        family.fresh.append(False)
    # A few sites are written as one part: their answer is sent whole, and a part per
    # family was a tenth of one store's scrape outside the database.
    if gathering.sites <= ONE_PART_SITES:
        yield _one_part(texts, definitions, openmetrics)
        return
    for metric in definitions:
        family = texts.pop(metric.name, _NO_FAMILY)
        if family.pieces:
            yield from in_parts(metric.name, family, generations, _header(metric, openmetrics))


def gather(results: Sequence[SiteResult], *, apart: bool = False) -> Gathering:
    """Each family's texts of the sites of `results`, in their order (the same for the
    text format and OpenMetrics: only the heads differ); `apart`: with kept texts of
    their own (`APART`: sites gathered beside the others of a scrape)."""
    texts, generations = (APART if apart else TEXTS).families(
        (_site_pairs(result.label, result.labels), result.samples) for result in results
    )
    return Gathering(texts, generations, len(results))


_NO_FAMILY = Family()


@functools.lru_cache(maxsize=64)
def _extra_line(metric: MetricDef, labels: Labels, number: str) -> bytes:
    """A sample without a site (build info, the last reload's), by its number as
    written (1 and 1.0, 0.0 and -0.0 are equal keys, not equal lines): the same object
    while it is the same, as the kept texts are."""
    pairs = _pairs(labels)
    written = "{" + pairs + "}" if pairs else ""
    return f"{metric.sample_name}{written} {number}\n".encode()


def _one_part(
    texts: dict[str, Family], definitions: Iterable[MetricDef], openmetrics: bool
) -> Part:
    """Every family's head and texts, in the definitions' order, as one part, without
    marks: a few sites' answer changes at every scrape (its durations), and is coded
    anew each time (`web.kept_gzip`)."""
    written = Part()
    for metric in definitions:
        family = texts.get(metric.name)
        if family is not None and family.pieces:
            written.append(_header(metric, openmetrics))
            written += family.pieces
    return written


def _family_text(samples: list[Sample], places: tuple[int, ...], site_pairs: str) -> bytes:
    """The lines of a site's samples of one family (at `places`). The hot loop of a
    scrape whose samples changed: the number is formatted inline (`_number`), and 4 in
    5 values are small whole numbers written once in `_WHOLE`."""
    if len(places) == 1:  # most families written at a scrape: an age, a duration
        return _line_text(samples[places[0]], site_pairs)
    bare, labelled = site_pairs + "} ", site_pairs + ","
    whole, label_texts, copysign = _WHOLE, _LABEL_TEXTS, math.copysign
    sample_name = samples[places[0]].metric.sample_name
    lines: list[str] = []
    append = lines.append
    for place in places:
        item = samples[place]
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
            append(f"{sample_name}{item.suffix}{labelled}{text}}} {number}\n")
        else:
            append(f"{sample_name}{item.suffix}{bare}{number}\n")
    return "".join(lines).encode()


def _line_text(item: Sample, site_pairs: str) -> bytes:
    """`_family_text` of one sample: its line, without the loop and the join (six of a
    quiet store's seven families written anew at a scrape are of one line)."""
    number = _number(item.value)
    labels = item.labels
    if not labels:
        return f"{item.metric.sample_name}{item.suffix}{site_pairs}}} {number}\n".encode()
    text = _LABEL_TEXTS.get(labels)
    if text is None:
        text = _label_text(labels)
    return f"{item.metric.sample_name}{item.suffix}{site_pairs},{text}}} {number}\n".encode()


# The text formats' encodings of each site's families, kept from the last scrape.
TEXTS: KeptTexts[str] = KeptTexts(_family_text, lines=True)
# Those of the sites a scrape gathers apart from its others (a helper's, reported as
# down while it does not answer: `split`).
APART: KeptTexts[str] = KeptTexts(_family_text, lines=True)


def forget() -> None:
    """The texts kept from the last scrape are let go of: the scraper asks for protobuf,
    and would leave a text scrape's (a `curl`'s) held until the next."""
    TEXTS.forget()
    APART.forget()


@functools.lru_cache(maxsize=512)
def _header(metric: MetricDef, openmetrics: bool) -> bytes:
    """A family's HELP and TYPE, made once (its own mark in a part: `family_parts`)."""
    if openmetrics:
        help_text = _escape(metric.help, quote=True)
        return f"# HELP {metric.name} {help_text}\n# TYPE {metric.name} {metric.kind}\n".encode()
    name = metric.sample_name if metric.kind in ("counter", "info") else metric.name
    help_text = _escape(metric.help, quote=False)
    return f"# HELP {name} {help_text}\n# TYPE {name} {_TEXT_TYPES[metric.kind]}\n".encode()


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
