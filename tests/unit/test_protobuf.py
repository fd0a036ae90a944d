"""The protobuf exposition, decoded with Prometheus' own data model (generated from its
metrics.proto): every family the text format has, with the same values, and each
histogram's native buckets as computed here independently from the observations."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from actionscheduler_exporter.collectors.log_events.histogram import Histogram
from actionscheduler_exporter.exposition import family_parts, protobuf, writer
from actionscheduler_exporter.exposition.render import PROTOBUF, negotiate, render
from actionscheduler_exporter.metrics import catalog, native
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.rounds.result import SiteResult
from testbed.accept_headers import NATIVE_ACCEPT, PROMETHEUS_ACCEPT
from testbed.metrics_proto import decode, family_names, metrics_pb2
from tests.unit.test_writer import anew, results

TYPES = {"counter": 0, "gauge": 1, "info": 1, "histogram": 4, "unknown": 3}


def test_prometheus_with_native_histograms_gets_protobuf_and_without_does_not() -> None:
    assert negotiate(NATIVE_ACCEPT) == PROTOBUF
    assert negotiate(PROMETHEUS_ACCEPT).startswith("application/openmetrics-text")
    assert negotiate(None).startswith("text/plain")
    # protobuf of another message, or not delimited: not ours to write
    assert negotiate("application/vnd.google.protobuf;proto=other;encoding=delimited") != PROTOBUF
    assert (
        negotiate(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"
        )
        != PROTOBUF
    )
    assert negotiate(f"{PROTOBUF};q=0.1,text/plain;q=0.5").startswith("text/plain")
    # Asked again, the same answers (remembered); a header longer than any scraper's is
    # read each time, never remembered.
    assert negotiate(NATIVE_ACCEPT) == PROTOBUF
    padded = "x-padding/none;q=0.9," * 100 + NATIVE_ACCEPT
    assert len(padded) > 1024
    assert negotiate(padded) == PROTOBUF and negotiate(padded) == PROTOBUF


def labels_of(metric: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((pair.name, pair.value) for pair in metric.label))


def decoded_samples(body: bytes) -> dict[str, Any]:
    """Per family: type, help and its samples as the text format would name them."""
    out: dict[str, Any] = {}
    for family in decode(body):
        samples = set()
        for metric in family.metric:
            labels = labels_of(metric)
            if family.type == 4:
                h = metric.histogram
                for bucket in h.bucket:
                    le = (("le", repr(bucket.upper_bound)),)
                    key = tuple(sorted(labels + le))
                    samples.add((family.name + "_bucket", key, float(bucket.cumulative_count)))
                if h.bucket:  # the +Inf bucket is the count (optional in protobuf)
                    key = tuple(sorted((*labels, ("le", "+Inf"))))
                    samples.add((family.name + "_bucket", key, float(h.sample_count)))
                    samples.add((family.name + "_sum", labels, h.sample_sum))
                samples.add((family.name + "_count", labels, float(h.sample_count)))
            else:
                field = {0: "counter", 1: "gauge", 3: "untyped"}[family.type]
                samples.add((family.name, labels, getattr(metric, field).value))
        out[family.name] = (family.type, family.help, samples)
    return out


def text_samples(body: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for family in text_string_to_metric_families(body.decode()):
        name = family.name + "_total" if family.type == "counter" else family.name
        samples = {
            (item.name, tuple(sorted(item.labels.items())), item.value) for item in family.samples
        }
        out[name] = (TYPES[family.type], family.documentation, samples)
    return out


def without_process(families: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in families.items() if not name.startswith("process_")}


def test_every_family_of_the_text_format_decodes_with_the_same_samples() -> None:
    found = results()
    body, content_type = render(found, NATIVE_ACCEPT)
    assert content_type == PROTOBUF
    text, _ = render(found, None)
    assert without_process(decoded_samples(body)) == without_process(text_samples(text))
    names = [family.name for family in decode(body)]
    assert "process_cpu_seconds_total" in names and "process_resident_memory_bytes" in names
    # The process's own, whose values move: the same families, types, help and samples.
    assert _process_shape(decoded_samples(body)) == _process_shape(text_samples(text))


def _process_shape(families: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (kind, help_text, sorted(item[:2] for item in samples))
        for name, (kind, help_text, samples) in families.items()
        if name.startswith("process_")
    }


def native_buckets(histogram: Any) -> dict[int, int]:
    """Absolute counts per bucket index, from the spans and deltas as metrics.proto
    defines them (a later span's offset is the gap after the one before)."""
    counts: dict[int, int] = {}
    count = 0
    after: int | None = None  # the index after the previous span
    deltas = iter(histogram.positive_delta)
    for span in histogram.positive_span:
        start = span.offset if after is None else after + span.offset
        for index in range(start, start + span.length):
            count += next(deltas)
            counts[index] = count
        after = start + span.length
    return counts


def expected_index(value: float) -> int:
    """The bucket of schema 3 holding `value`, found by walking the boundaries upwards
    (not by the exporter's logarithm): the first i with value <= 2**(i/8)."""
    index = -200
    while value > 2 ** (index / 8):
        index += 1
    return index


def histogram_of(body: bytes, name: str, **labels: str) -> Any:
    for family in decode(body):
        if family.name == name:
            for metric in family.metric:
                if dict(labels).items() <= dict(labels_of(metric)).items():
                    return metric.histogram
    raise AssertionError(f"no {name} {labels}")


def one_site(*items: Sample) -> list[SiteResult]:
    return [SiteResult("shop", (), True, list(items))]


OBSERVED = [0, 0, 1, 1, 2, 3, 3, 3, 7, 8, 9, 10, 11, 12, 60, 61, 64, 65, 300, 3600, 86400, 90000]


def test_native_buckets_hold_each_observation_where_schema_3_puts_it() -> None:
    delays = Histogram(catalog.START_DELAY, (0.5, 1, 5))
    for value in OBSERVED:
        delays.observe((("group", "g"),), value)
    body, _ = render(one_site(*delays.samples()), NATIVE_ACCEPT)
    h = histogram_of(body, catalog.START_DELAY.name, group="g")
    assert h.schema == 3 and h.zero_threshold == 0.5
    assert h.zero_count == OBSERVED.count(0)
    assert native_buckets(h) == Counter(expected_index(v) for v in OBSERVED if v > 0.5)
    assert h.sample_count == len(OBSERVED) and h.sample_sum == sum(OBSERVED)
    assert [(b.upper_bound, b.cumulative_count) for b in h.bucket] == [
        (0.5, 2),
        (1.0, 4),
        (5.0, 8),
    ]
    # the powers of two are boundaries: whole seconds never straddle them
    assert all(native.upper_bound(8 * k) == 2.0**k for k in range(-3, 17))


def test_without_classic_histograms_the_protobuf_has_native_buckets_only() -> None:
    delays = Histogram(catalog.START_DELAY, (0.5, 1, 5), classic=False)
    for value in OBSERVED:
        delays.observe((("group", "g"),), value)
    items = list(delays.samples())
    body, _ = render(one_site(*items), NATIVE_ACCEPT)
    h = histogram_of(body, catalog.START_DELAY.name, group="g")
    assert len(h.bucket) == 0 and h.sample_count == len(OBSERVED)
    assert native_buckets(h) == Counter(expected_index(v) for v in OBSERVED if v > 0.5)
    # the text formats keep their classic buckets whatever the setting
    text, _ = render(one_site(*items), None)
    assert b'start_delay_seconds_bucket{site="shop",group="g",le="5.0"} 8\n' in text


def own_part(body: bytes) -> bytes:
    """The exposition up to the process's own families, whose values move (CPU time)."""
    own, process = body.split(b"# HELP process_", 1)
    assert process
    return own


def test_text_and_openmetrics_are_byte_for_byte_what_plain_samples_give() -> None:
    """The native state rides on the `_count` samples, and native-only families stay out:
    the text formats come out exactly as from plain samples without them."""
    by_hook = Histogram(catalog.START_DELAY_BY_HOOK, (), native_only=True)
    for value in OBSERVED:
        by_hook.observe((("hook", "h"),), value)
    found = results()
    found[0].samples += by_hook.samples()
    plain = [
        dataclasses.replace(
            result,
            samples=[
                Sample(s.metric, s.value, s.labels, s.suffix)
                for s in result.samples
                if s.metric not in catalog.NATIVE_ONLY
            ],
        )
        for result in found
    ]
    for accept in (None, "text/plain; version=1.0.0", PROMETHEUS_ACCEPT):
        body, _ = render(found, accept)
        assert own_part(body) == own_part(render(plain, accept)[0])
        assert catalog.START_DELAY_BY_HOOK.name.encode() not in body
    body, _ = render(found, NATIVE_ACCEPT)
    h = histogram_of(body, catalog.START_DELAY_BY_HOOK.name, hook="h")
    assert len(h.bucket) == 0 and h.sample_count == len(OBSERVED)
    assert native_buckets(h) == Counter(expected_index(v) for v in OBSERVED if v > 0.5)


def test_an_empty_histogram_is_still_native() -> None:
    state = native.NativeHistogram(0, 0.0, 0, ())
    message = metrics_pb2().Histogram()
    message.ParseFromString(protobuf.histogram(state))
    assert message.zero_threshold == 0.5 and len(message.positive_span) == 1


def test_varints_and_zigzag_match_the_generated_classes() -> None:
    message = metrics_pb2().Histogram()
    values = [0, 1, -1, 63, -64, 2**31, -(2**31), 2**62, -(2**62)]
    message.ParseFromString(
        b"".join(protobuf._sint(13, value) for value in values)  # unpacked form too
    )
    assert list(message.positive_delta) == values
    assert protobuf.varint(300) == b"\xac\x02" and protobuf.varint(-1)[-1] == 0x01


hostile = st.text(max_size=40)  # unicode, empty, quotes, backslashes, newlines, NUL


@settings(max_examples=150, deadline=None)
@given(
    site=hostile,
    constant=hostile,
    hooks=st.lists(hostile, min_size=1, max_size=6, unique=True),
    values=st.lists(st.integers(0, 200_000), min_size=1, max_size=30),
    counts=st.lists(st.floats(allow_nan=False), min_size=1, max_size=6),
)
def test_decoding_the_protobuf_gives_back_what_was_encoded(
    site: str, constant: str, hooks: list[str], values: list[int], counts: list[float]
) -> None:
    """decode(encode(x)) == x for hostile label values, whatever the text holds."""
    durations = Histogram(catalog.RUN_DURATION, (1, 60), classic=bool(len(values) % 2))
    items: list[Sample] = []
    for index, hook in enumerate(hooks):
        items.append(sample(catalog.FAILED_BY_HOOK, counts[index % len(counts)], hook=hook))
        for value in values[index:]:
            durations.observe((("hook", hook),), value)
    items += durations.samples()
    result = SiteResult(site, (("team", constant),), True, items)
    body, _ = render([result], NATIVE_ACCEPT)
    families = {family.name: family for family in decode(body)}
    site_labels = {("site", site), ("team", constant)}

    failed = families[catalog.FAILED_BY_HOOK.name]
    assert failed.type == 1 and failed.help == catalog.FAILED_BY_HOOK.help
    assert {(labels_of(metric), metric.gauge.value) for metric in failed.metric} == {
        (tuple(sorted({*site_labels, ("hook", hook)})), counts[index % len(counts)])
        for index, hook in enumerate(hooks)
    }
    runs = families[catalog.RUN_DURATION.name]
    assert runs.type == 4
    decoded = {labels_of(metric): metric.histogram for metric in runs.metric}
    for index, hook in enumerate(hooks):
        observed = values[index:]
        key = tuple(sorted({*site_labels, ("hook", hook)}))
        if not observed:
            assert key not in decoded
            continue
        h = decoded[key]
        assert h.sample_count == len(observed) and h.sample_sum == math.fsum(observed)
        assert h.zero_count == observed.count(0)
        assert native_buckets(h) == Counter(expected_index(v) for v in observed if v > 0.5)
        assert len(h.bucket) == (2 if durations.classic else 0)


def test_the_documented_resolution_of_schema_3() -> None:
    """docs/native-histograms.md: up to 14 s each whole second has a bucket of its own,
    from 1 s to a day is 133 buckets, a bucket is 8.3 % of its upper bound wide."""
    assert len({expected_index(seconds) for seconds in range(1, 15)}) == 14
    assert expected_index(15) == expected_index(16)
    assert expected_index(86400) - expected_index(1) + 1 == 133
    whole = [*range(1, 3000), 65535, 65536, 65537, 86399, 86400, 86401]
    assert [native.bucket_index(s) for s in whole] == [expected_index(s) for s in whole]
    width = 1 - native.upper_bound(-1) / native.upper_bound(0)
    assert round(width * 100, 1) == 8.3


def test_the_messages_are_given_in_parts_and_read_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 40: each family's Metric fields are gathered in parts of `SITES_PER_PART`
    sites and given out in turn after the family's head and length, never joined into
    one body; however the sites are grouped, the stream is the same bytes, message by
    message."""
    found = [*results(), *(dataclasses.replace(result, label="third") for result in results())]
    whole = protobuf.encode(found, catalog.ALL, [])
    monkeypatch.setattr(family_parts, "SITES_PER_PART", 1)
    parts = [b"".join(part) for part in protobuf.families(found, catalog.ALL, [])]
    assert b"".join(parts) == whole
    assert family_names(whole) == [family.name for family in decode(whole)]
    assert len(parts) > 2 * len(decode(whole))
    assert [family.name for family in decode(whole)] == sorted(
        {family.name for family in decode(whole)},
        key=[protobuf.family_name(metric) for metric in catalog.ALL].index,
    )


@pytest.fixture(autouse=True)
def nothing_kept() -> None:
    """Each test starts with no fields or texts kept by the tests before it."""
    protobuf.FIELDS.take()
    writer.TEXTS.take()


def fresh_encoding(found: list[SiteResult]) -> bytes:
    """The encoding as a first protobuf scrape makes it, with nothing kept before."""
    protobuf.FIELDS.take()
    return protobuf.encode(found, catalog.ALL, [])


def test_fields_kept_from_scrape_to_scrape_encode_as_a_first_scrape_does() -> None:
    """Each site's fields of a family are encoded once and taken again while its samples
    stay the same objects, or equal ones; a changed value is encoded anew, alone."""
    both = results()
    first = fresh_encoding([anew(result) for result in both])
    assert [protobuf.encode(both, catalog.ALL, []) for _ in range(3)] == [first] * 3
    kept = protobuf.FIELDS.sites
    assert len(kept) == 2 and all(None not in site.texts for site in kept.values())
    assert protobuf.encode([anew(result) for result in both], catalog.ALL, []) == first
    # Equal samples made anew are taken as kept; a histogram's only when the same object.
    for site in protobuf.FIELDS.sites.values():
        assert [site.layout.metrics[family] for family in site.unkept] == [catalog.START_DELAY]
    changed = dataclasses.replace(both[0], samples=list(both[0].samples))
    place = next(
        place for place, item in enumerate(changed.samples) if item.metric is catalog.ACTIVE_CLAIMS
    )
    changed.samples[place] = dataclasses.replace(changed.samples[place], value=7)
    expected = fresh_encoding([changed, both[1]])
    protobuf.encode(both, catalog.ALL, [])
    assert protobuf.encode([changed, both[1]], catalog.ALL, []) == expected
    site = next(iter(protobuf.FIELDS.sites.values()))
    assert [site.layout.metrics[family] for family in site.unkept] == [catalog.ACTIVE_CLAIMS]


def test_a_histogram_with_the_same_count_and_other_buckets_is_encoded_anew() -> None:
    """A histogram's count says nothing of its buckets: one made anew is encoded again,
    whatever its count (the text formats write its buckets as samples of their own)."""
    (site, _) = results()
    place, item = next(
        (place, item)
        for place, item in enumerate(site.samples)
        if isinstance(item, native.HistogramCount) and item.native is not None
    )
    assert isinstance(item, native.HistogramCount) and item.native is not None
    moved = dataclasses.replace(item.native, positive=((item.native.positive[0][0] + 1, 1),))
    other = anew(site)
    other.samples[place] = dataclasses.replace(item, native=moved)
    expected = fresh_encoding([other])
    before = fresh_encoding([site])  # kept: the fields of `site`
    assert protobuf.encode([other], catalog.ALL, []) == expected != before


def test_a_text_scrape_lets_go_of_the_protobuf_fields() -> None:
    both = results()
    render(both, NATIVE_ACCEPT)
    assert protobuf.FIELDS.sites
    render(both, None)
    assert protobuf.FIELDS.sites == {} and protobuf.FIELDS.layouts == {}
