"""Writes a scrape's samples as Prometheus' protobuf exposition: `MetricFamily` messages of
io.prometheus.client (client_model's metrics.proto), each preceded by its length as a
varint ("encoding=delimited"). The one format that carries native histograms.

Written by hand: the messages use four wire forms (varint, zigzag varint, 64-bit double,
length-delimited), which is less code than a runtime dependency on `protobuf`. The tests
decode the output with classes generated from metrics.proto itself (testbed/proto/).
Histograms are written from their `_count` samples, which carry the whole series
(metrics/native.py); their `_bucket` and `_sum` samples serve the text formats only.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain

from actionscheduler_exporter.exposition.family_parts import (
    Family,
    Gathering,
    Part,
    in_parts,
)
from actionscheduler_exporter.exposition.kept_texts import KeptTexts, same_line
from actionscheduler_exporter.exposition.process import ProcessSample
from actionscheduler_exporter.metrics import native
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels, Sample
from actionscheduler_exporter.rounds.result import SiteResult

# MetricType of metrics.proto.
_COUNTER, _GAUGE, _UNTYPED, _HISTOGRAM = 0, 1, 3, 4
_TYPES = {"counter": _COUNTER, "gauge": _GAUGE, "info": _GAUGE, "histogram": _HISTOGRAM}
# Field numbers of Metric: the value message each type is written in.
_VALUE_FIELD = {_COUNTER: 3, _GAUGE: 2, _UNTYPED: 5}
_DOUBLE = struct.Struct("<d")


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Most varints of a scrape are small (lengths, bucket counts and their deltas): looked up.
_SMALL = tuple(_varint(value) for value in range(1 << 14))


def varint(value: int) -> bytes:
    """A base-128 varint; a negative int64 as its two's complement (ten bytes)."""
    if 0 <= value < 16384:
        return _SMALL[value]
    return _varint(value)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def _uint(field: int, value: int) -> bytes:
    return _key(field, 0) + varint(value)


def _sint(field: int, value: int) -> bytes:
    return _key(field, 0) + varint(_zigzag(value))


def _double(field: int, value: float) -> bytes:
    return _key(field, 1) + _DOUBLE.pack(value)


def _bytes(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + varint(len(payload)) + payload


def _string(field: int, text: str) -> bytes:
    # Label values come through db.schema.label_value, which replaces lone surrogates: the
    # same strict UTF-8 as the text formats.
    return _bytes(field, text.encode())


@functools.lru_cache(maxsize=65_536)
def _label_pairs(labels: Labels) -> bytes:
    """Metric.label for each pair, names in order. Cached per set, as the text writer's."""
    return b"".join(
        _bytes(1, _string(1, name) + _string(2, value)) for name, value in sorted(labels)
    )


@functools.lru_cache(maxsize=512)
def _family_head(name: str, help_text: str, kind: int) -> bytes:
    return _string(1, name) + _string(2, help_text) + _uint(3, kind)


def _family(name: str, help_text: str, kind: int, metrics: list[bytes]) -> bytes:
    parts = [_family_head(name, help_text, kind)]
    for metric in metrics:
        parts += (_METRIC_KEY, varint(len(metric)), metric)
    body = b"".join(parts)
    return varint(len(body)) + body


# A Gauge, Counter or Untyped message in its Metric field: always the same nine bytes
# long (the value's key and a double), so its head is a constant.
_VALUE_HEAD = {kind: _key(field, 2) + b"\x09" + _key(1, 1) for kind, field in _VALUE_FIELD.items()}
_METRIC_KEY = _key(4, 2)


def _value_metric(labels: bytes, kind: int, value: float) -> bytes:
    return labels + _VALUE_HEAD[kind] + _DOUBLE.pack(value)


# Keys of the Histogram message's fields (field number << 3 | wire type).
_COUNT, _SUM, _BUCKET = b"\x08", b"\x11", b"\x1a"
_LAYOUT = _sint(5, native.SCHEMA) + _double(6, native.ZERO_THRESHOLD) + _key(7, 0)
_SPAN, _DELTAS = _key(12, 2), _key(13, 2)
_NO_OP_SPAN = _SPAN + b"\x04" + _sint(1, 0) + _uint(2, 0)


def histogram(state: native.NativeHistogram) -> bytes:
    """A Histogram message: count, sum, the classic buckets when kept, and the native ones
    (spans of consecutive indexes, each bucket's count as a delta from the one before)."""
    out = [_COUNT, varint(state.count), _SUM, _DOUBLE.pack(state.total)]
    for bound, cumulative in state.classic or ():
        encoded = varint(cumulative)  # a Bucket: its count's key and varint, a double's 9
        out += (_BUCKET, _SMALL[10 + len(encoded)], _COUNT, encoded, _SUM, _DOUBLE.pack(bound))
    out += (_LAYOUT, varint(state.zero_count))
    deltas: list[bytes] = []
    previous_index: int | None = None
    previous_count = 0
    span_start, span_length = 0, 0
    for index, count in state.positive:
        if previous_index is not None and index == previous_index + 1:
            span_length += 1
        else:
            if span_length:
                out.append(_span(span_start, span_length))
            # The first span's offset is its index, a later one's the gap after the last.
            span_start = index if previous_index is None else index - previous_index - 1
            span_length = 1
        deltas.append(varint(_zigzag(count - previous_count)))
        previous_index, previous_count = index, count
    if span_length:
        out.append(_span(span_start, span_length))
        packed = b"".join(deltas)
        out += (_DELTAS, varint(len(packed)), packed)
    else:
        # No bucket yet: the no-op span metrics.proto asks for, which says "native".
        out.append(_NO_OP_SPAN)
    return b"".join(out)


def _span(offset: int, length: int) -> bytes:
    """A positive_span field: a BucketSpan message."""
    body = b"\x08" + varint(_zigzag(offset)) + b"\x10" + varint(length)
    return _SPAN + varint(len(body)) + body


def family_name(metric: MetricDef) -> str:
    """The name Prometheus stores: a counter's and an info's with their suffix, as their
    text-format families are named; a histogram's series names follow from it."""
    return metric.sample_name if metric.kind in ("counter", "info") else metric.name


def encode(
    results: Sequence[SiteResult],
    definitions: Iterable[MetricDef],
    extra: Iterable[tuple[MetricDef, Labels, float]],
) -> bytes:
    """The whole exposition of `families`, at once (tests)."""
    return b"".join(chain.from_iterable(families(results, definitions, extra)))


def families(
    results: Sequence[SiteResult],
    definitions: Iterable[MetricDef],
    extra: Iterable[tuple[MetricDef, Labels, float]],
) -> Iterator[Part]:
    """Families in the catalog's order, the samples of every site in each; `extra` are
    samples without a site (build info). Each site's Metric fields of one family are
    encoded as one piece, the last scrape's taken again while its samples encode the
    same (`kept_texts`, as the text writer's); each family's pieces (a thousand stores'
    fields are 174,000) are given out in parts of `SITES_PER_PART` sites after the
    family's length and head (`family_parts`)."""
    return written(gather(results), definitions, extra)


def written(
    gathering: Gathering,
    definitions: Iterable[MetricDef],
    extra: Iterable[tuple[MetricDef, Labels, float]],
) -> Iterator[Part]:
    """`families` of sites already gathered (`gather`, `family_parts.joined`)."""
    fields, generations = gathering.families, gathering.generations
    for definition, labels_of, value in extra:
        metric = _extra_metric(definition, labels_of, float(value).hex())
        family = fields.setdefault(definition.name, Family())
        family.pieces.append(metric)
        family.sites.append(metric)  # a small piece is its own mark
        family.fresh.append(False)
    for definition in definitions:
        found = fields.pop(definition.name, None)
        # None of a histogram family without a native one: the text formats' alone.
        size = sum(map(len, found.pieces)) if found is not None else 0
        if found is not None and size:
            # The head (with the family's length) apart: it changes with any site's fields.
            head = _sized_head(definition, size)
            yield Part([head], (head,))
            yield from in_parts(definition.name, found, generations)


def gather(results: Sequence[SiteResult], *, apart: bool = False) -> Gathering:
    """Each family's Metric fields of the sites of `results`, in their order; `apart`:
    with kept fields of their own (as the text writer's `APART`)."""
    # The site's labels and a sample's own are encoded apart, each set once (as the
    # text writer does); Prometheus sorts a series' labels itself.
    fields, generations = (APART if apart else FIELDS).families(
        (_label_pairs((("site", result.label), *result.labels)), result.samples)
        for result in results
    )  # per family, its sites' fields in the sites' order
    return Gathering(fields, generations, len(results))


@functools.lru_cache(maxsize=64)
def _extra_metric(definition: MetricDef, labels: Labels, value: str) -> bytes:
    """A sample without a site (build info, the last reload's), by its value's exact
    bits (`float.hex`: 0.0 and -0.0 are equal keys, not equal fields), made once."""
    body = _value_metric(_label_pairs(labels), _TYPES[definition.kind], float.fromhex(value))
    return _METRIC_KEY + varint(len(body)) + body


@functools.lru_cache(maxsize=256)
def _sized_head(definition: MetricDef, fields_size: int) -> bytes:
    """A family's length and head, made once per length."""
    head = _family_head(family_name(definition), definition.help, _TYPES[definition.kind])
    return varint(len(head) + fields_size) + head


def _family_fields(samples: list[Sample], places: tuple[int, ...], site: bytes) -> bytes:
    """A site's Metric fields of one family (its samples at `places`)."""
    kind = _TYPES[samples[places[0]].metric.kind]
    out: list[bytes] = []
    for place in places:
        item = samples[place]
        if kind == _HISTOGRAM:
            if not isinstance(item, native.HistogramCount) or item.native is None:
                continue  # _bucket and _sum: the text formats'
            body = site + _label_pairs(item.labels) + _bytes(7, histogram(item.native))
        else:
            body = _value_metric(site + _label_pairs(item.labels), kind, item.value)
        out += (_METRIC_KEY, varint(len(body)), body)
    return b"".join(out)


def _same_field(old: Sample, new: Sample) -> bool:
    """Whether a sample made anew encodes as the one kept: a histogram's count says
    nothing of its buckets, so a histogram (then or now) is only when it is the same
    object."""
    if isinstance(old, native.HistogramCount) or isinstance(new, native.HistogramCount):
        return False
    return same_line(old, new)


# Each site's fields of each family, kept from the last protobuf scrape.
FIELDS: KeptTexts[bytes] = KeptTexts(_family_fields, _same_field)
APART: KeptTexts[bytes] = KeptTexts(_family_fields, _same_field)


def forget() -> None:
    """The fields kept from the last scrape are let go of: the scraper asks for text."""
    FIELDS.forget()
    APART.forget()


def encode_process(samples: Iterable[ProcessSample]) -> bytes:
    """The process's own metrics, each a family of one sample without labels."""
    out: list[bytes] = []
    for item in samples:
        kind = _TYPES[item.kind]
        metric = _value_metric(b"", kind, item.value)
        out.append(_family(item.sample_name, item.help, kind, [metric]))
    return b"".join(out)
