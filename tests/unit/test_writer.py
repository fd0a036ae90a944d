"""The exposition writer against prometheus-client's own encoders and parsers, from
results a scripted round produced (no server: the writer is pure)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as parse_text

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.collectors.log_events.histogram import Histogram
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.exposition import family_parts, process, writer
from actionscheduler_exporter.exposition.process import process_samples
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.timing import Deadline
from testbed.accept_headers import NATIVE_ACCEPT, PROMETHEUS_ACCEPT
from tests.support.clock import FakeClock
from tests.support.fake_session import FakeSession, healthy_store
from tests.support.reference_exposition import parsed, render_with_library

HOSTILE = ['quote " here', "back\\slash", "new\nline", "emoji 🎉", "{braces}"]


def results() -> list[SiteResult]:
    clock = FakeClock()
    site = dataclasses.replace(
        SiteConfig(name="shop"), labels=(("team", 'a"b\\c'),), heavy_interval=300.0
    )
    sources = site_sources(site, clock).without_heavy()
    session = FakeSession(site, healthy_store())
    site_round = MonitoredSite(site, clock, sources=sources, session=session)
    try:
        (result,) = site_round.finish(
            site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
        )
    finally:
        site_round.close()
    delay = Histogram(catalog.START_DELAY, (0.5, 1, 5))
    for index, hook in enumerate(HOSTILE):
        result.samples.append(sample(catalog.FAILED_BY_HOOK, index, hook=hook))
        delay.observe((("group", hook),), index)
    result.samples += delay.samples()
    return [result, dataclasses.replace(result, label="other shop")]


@pytest.mark.parametrize("accept", [None, "text/plain; version=1.0.0", PROMETHEUS_ACCEPT])
def test_the_writer_reads_as_prometheus_clients_own(accept: str | None) -> None:
    found = results()
    body, content_type = render(found, accept)
    reference, reference_type = render_with_library(found, accept)
    assert content_type.split(";")[:2] == reference_type.split(";")[:2]
    assert parsed(body, content_type) == parsed(reference, reference_type)
    assert body.endswith(b"# EOF\n") == ("openmetrics" in content_type)


@given(st.floats(allow_nan=True, allow_infinity=True))
@example(999_999.999_999_9)
@example(1e6)
@example(-1e6)
@example(-0.0)
@example(1e-300)
def test_numbers_are_written_as_go_writes_them(value: float) -> None:
    """The writer's short path for values below a million is Python's repr: the same text
    as prometheus-client's Go formatting (floatToGoString) for every float."""
    assert writer._number(value) == writer._go_number(value)


@pytest.mark.parametrize(
    "value", [0.0, -0.0, 3.0, 3, 1023.0, 1024.0, 2.5, -7.0, 1e6, 1.7e9, float("inf"), float("nan")]
)
def test_a_sites_numbers_are_written_as_go_writes_them(value: float) -> None:
    """The same through `encode`, whose loop formats inline (the small whole numbers from
    a table, where -0.0 would find 0.0's entry); an int, as Go's clients write a count."""
    found = SiteResult("shop", (), True, [Sample(catalog.UP, value)])
    body = writer.encode([found], [catalog.UP], [], openmetrics=False).decode()
    written = str(value) if isinstance(value, int) else writer._go_number(value)
    assert body.splitlines()[-1] == f'actionscheduler_up{{site="shop"}} {written}'


def test_a_family_whose_samples_come_apart_is_written_whole() -> None:
    """The loop looks a family's list up once per run of its samples: a family that comes
    back after another (a collector's samples, then the counters `finish` adds) has all
    its lines under its one header, each site's in turn."""
    sites = [
        SiteResult(name, (), True, [
            sample(catalog.FAILED_BY_HOOK, 1, hook="a"),
            Sample(catalog.UP, 1.0),
            sample(catalog.FAILED_BY_HOOK, 2, hook="b"),
        ])
        for name in ("one", "two")
    ]  # fmt: skip
    body = writer.encode(sites, catalog.ALL, [], openmetrics=False).decode().splitlines()
    family = [line for line in body if line.startswith(catalog.FAILED_BY_HOOK.name + "{")]
    header = body.index(f"# TYPE {catalog.FAILED_BY_HOOK.name} gauge")
    assert body[header + 1 : header + 5] == family
    assert [line.split('"')[1] + line.split('"')[3] for line in family] == [
        "onea", "oneb", "twoa", "twob"
    ]  # fmt: skip


def test_the_exposition_is_given_in_parts_of_whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: the exposition is given in parts, each encoded and let go of in turn, so
    that a thousand stores' 15 MB are never joined into one body, nor a family into one
    text: a part is the lines of `SITES_PER_PART` sites of one family (here one site's),
    as pieces. Each part is whole lines, a family's header comes once, in its first part,
    and sites whose samples come in another order of families are written as they are."""
    monkeypatch.setattr(family_parts, "SITES_PER_PART", 1)
    monkeypatch.setattr(writer, "ONE_PART_SITES", 0)
    found = [
        *results(),
        SiteResult("few", (), True, [Sample(catalog.UP, 1.0)]),
        SiteResult("families reversed", (), True, families_reversed(results()[0].samples)),
    ]
    parts = [b"".join(part) for part in writer.families(found, catalog.ALL, [], openmetrics=True)]
    families = {item.metric.name for result in found for item in result.samples}
    assert len(parts) > len(families)  # a part of one site each, the head in the first
    assert all(part.endswith(b"\n") for part in parts)
    body = b"".join(parts)
    assert body == text_of(found, openmetrics=True)
    up = catalog.UP.name
    assert body.count(f"# TYPE {up} gauge\n".encode()) == 1
    rendered, content_type = render(found, PROMETHEUS_ACCEPT)
    reference, reference_type = render_with_library(found, PROMETHEUS_ACCEPT)
    assert parsed(rendered, content_type) == parsed(reference, reference_type)


def test_a_few_sites_are_written_as_one_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """One store's answer is sent whole: it is written as one part, the same bytes as in
    parts (a part per family was a tenth of a small scrape outside the database)."""
    found = [*results(), SiteResult("families reversed", (), True,
                                    families_reversed(results()[0].samples))]  # fmt: skip
    extra = [(catalog.BUILD_INFO, (("version", "1"),), 1.0)]
    monkeypatch.setattr(family_parts, "SITES_PER_PART", 2)  # a part within them changes nothing
    for openmetrics in (False, True):
        whole = list(writer.families(found, catalog.ALL, extra, openmetrics=openmetrics))
        assert len(whole) == 1
        monkeypatch.setattr(writer, "ONE_PART_SITES", 0)
        in_parts = list(writer.families(found, catalog.ALL, extra, openmetrics=openmetrics))
        monkeypatch.setattr(writer, "ONE_PART_SITES", len(found))
        assert len(in_parts) > len(found)
        assert b"".join(whole[0]) == b"".join(piece for part in in_parts for piece in part)


def families_reversed(samples: list[Sample]) -> list[Sample]:
    """The samples with their families in the reverse order, each family's in its own."""
    by_family: dict[str, list[Sample]] = {}
    for item in samples:
        by_family.setdefault(item.metric.name, []).append(item)
    return [item for family in reversed(by_family.values()) for item in family]


def anew(result: SiteResult) -> SiteResult:
    """The result with samples of the same values, made anew (as a hot reading's are)."""
    return dataclasses.replace(result, samples=[dataclasses.replace(s) for s in result.samples])


def text_of(found: list[SiteResult], openmetrics: bool = False) -> bytes:
    return writer.encode(found, catalog.ALL, [], openmetrics=openmetrics)


def fresh_text_of(found: list[SiteResult], openmetrics: bool = False) -> bytes:
    """The text as a first scrape writes it, with nothing kept from the scrapes before."""
    writer.TEXTS.take()
    return text_of(found, openmetrics)


def family_texts(site: str) -> dict[str, bytes | None]:
    """The texts the last scrape wrote for a site (by its label text), per family."""
    kept = writer.TEXTS.sites[writer._site_pairs(site, ())]
    return {metric.name: text for metric, text in zip(kept.layout.metrics, kept.texts, strict=True)}


def test_samples_kept_from_scrape_to_scrape_are_written_the_same_each_time() -> None:
    """The heavy tier's and the cached readings' samples are the same objects at every
    scrape, and sites may share one (the two sites of `results` share all of theirs): a
    family's text is written once and taken again while its samples stay the same, and
    every writing reads as the first, in both text formats, each site's lines under its
    own label, whether one site is written or two in turn."""
    both = results()
    one = both[:1]
    for openmetrics in (False, True):
        for found in (both, one):
            first = fresh_text_of([anew(result) for result in found], openmetrics)
            assert [text_of(found, openmetrics) for _ in range(4)] == [first] * 4
    assert b'site="other shop"' in text_of(both)


def test_only_the_families_whose_samples_changed_are_written_again() -> None:
    """A hot reading's samples are made anew at every scrape: equal ones take the text
    written before, and a family with a changed value is written again, alone; its text
    is kept again once its samples stayed the same."""
    site = SiteResult("shop", (), True, [
        sample(catalog.DUE_ACTIONS, 3, claim="unclaimed"),
        Sample(catalog.UP, 1.0),
        sample(catalog.ACTIVE_CLAIMS, 1),
    ])  # fmt: skip
    again = anew(site)
    again.samples[2] = sample(catalog.ACTIVE_CLAIMS, 2)
    expected = fresh_text_of([again])
    fresh_text_of([site])
    before = family_texts("shop")
    assert text_of([again]) == expected
    after = family_texts("shop")
    assert after[catalog.DUE_ACTIONS.name] is before[catalog.DUE_ACTIONS.name]
    assert after[catalog.UP.name] is before[catalog.UP.name]
    # Changed, it will mostly change again: not kept, and written at the next scrape.
    assert after[catalog.ACTIVE_CLAIMS.name] is None
    assert text_of([anew(again)]) == expected
    (claims,) = [
        line
        for line in expected.splitlines(True)
        if line.startswith(b"actionscheduler_active_claims{")
    ]
    assert family_texts("shop")[catalog.ACTIVE_CLAIMS.name] == claims


def durations(values: list[float]) -> SiteResult:
    """A site with one collector's duration per value (a family of many lines), and its
    `up` between them."""
    samples = [sample(catalog.COLLECTOR_DURATION, value, collector=f"c{index}")
               for index, value in enumerate(values)]  # fmt: skip
    return SiteResult("shop", (), True, [Sample(catalog.UP, 1.0), *samples])


def test_a_family_with_a_few_of_its_lines_changed_is_kept_and_only_those_written_again() -> None:
    """A store's collectors' durations: one of a dozen changes at each scrape. The
    family's text is kept, and at the next scrape only the lines that changed again are
    written into it; a family with more than half of its lines changed is not kept."""
    values = [0.5] * 12
    fresh_text_of([durations(values)])
    for scrape in range(1, 6):
        values = [*values]
        values[scrape % 3] = scrape / 10
        expected = fresh_text_after_kept([durations(values)])
        assert text_of([durations(values)]) == expected
        kept = family_texts("shop")[catalog.COLLECTOR_DURATION.name]
        assert kept is not None and kept in expected
    values = [value + 1 for value in values]
    assert text_of([durations(values)]) == fresh_text_after_kept([durations(values)])
    assert family_texts("shop")[catalog.COLLECTOR_DURATION.name] is None


def test_a_family_apart_in_its_sites_samples_has_its_own_lines_written_into() -> None:
    """A family whose samples are not next to one another (a hook's failures around
    `up`): a changed sample's line is its place among its family's, not in the site's."""
    values = [1.0] * 6

    def site(values: list[float]) -> SiteResult:
        failed = [sample(catalog.FAILED_BY_HOOK, value, hook=f"h{index}")
                  for index, value in enumerate(values)]  # fmt: skip
        return SiteResult("shop", (), True, [failed[0], Sample(catalog.UP, 1.0), *failed[1:]])

    fresh_text_of([site(values)])
    for scrape in range(1, 5):
        values = [*values]
        values[2 + scrape % 3] = scrape + 0.5
        assert text_of([site(values)]) == fresh_text_after_kept([site(values)])
        assert family_texts("shop")[catalog.FAILED_BY_HOOK.name] is not None


@pytest.mark.parametrize(("size", "changed", "kept"), [(4, 2, True), (4, 3, False), (3, 1, False)])
def test_a_changed_family_is_kept_from_four_lines_with_at_most_half_changed(
    size: int, changed: int, kept: bool
) -> None:
    """The bounds of keeping a changed family's text to write into (`SPLICED_FROM` lines,
    half of them changed): the text reads the same either way."""
    values = [0.5] * size
    fresh_text_of([durations(values)])
    values = [*[0.25] * changed, *values[changed:]]
    assert text_of([durations(values)]) == fresh_text_after_kept([durations(values)])
    assert (family_texts("shop")[catalog.COLLECTOR_DURATION.name] is not None) is kept


def fresh_text_after_kept(found: list[SiteResult]) -> bytes:
    """The text of `found` as a first scrape writes it, the texts kept before left as
    they were."""
    kept = writer.TEXTS.take()
    try:
        return text_of(found)
    finally:
        writer.TEXTS.take()
        writer.TEXTS.keep(kept)


@given(
    st.lists(
        st.lists(st.sampled_from([0.0, -0.0, 1.0, 1, 2.5, 1e6, 3e-7]), min_size=12, max_size=12),
        min_size=1,
        max_size=6,
    )
)
def test_a_familys_lines_written_into_its_kept_text_read_as_written_anew(
    scrapes: list[list[float]],
) -> None:
    """Whatever changes from scrape to scrape (a zero's sign, an int's "1" against a
    float's "1.0", a large number), a family written into reads as written anew."""
    writer.TEXTS.take()
    for values in scrapes:
        assert text_of([durations(values)]) == fresh_text_after_kept([durations(values)])


@pytest.mark.parametrize(
    ("before", "after"),
    [(0.0, -0.0), (-0.0, 0.0), (3.0, 3), (3, 3.0), (1.0, 2.0), (1.0, float("nan"))],
)
def test_a_value_equal_but_written_otherwise_is_written_again(before: float, after: float) -> None:
    """Equal values that Go's clients write differently (a zero's sign, an int's "3"
    against a float's "3.0") are written anew, as every other change."""
    first = SiteResult("shop", (), True, [Sample(catalog.UP, before)])
    second = SiteResult("shop", (), True, [Sample(catalog.UP, after)])
    fresh_text_of([first])
    assert text_of([second]) == fresh_text_of([second])


def test_a_site_whose_families_moved_is_written_anew() -> None:
    """A site whose samples are not in the same places as at the last scrape (a hook's
    failures came, a family's samples are in another order) reads as written anew."""
    one, _ = results()
    failure = sample(catalog.FAILED_BY_HOOK, 9, hook="new")
    moved = [
        dataclasses.replace(one, samples=[*one.samples[:5], failure, *one.samples[5:]]),
        dataclasses.replace(one, samples=families_reversed(one.samples)),
        dataclasses.replace(one, samples=one.samples[:-3]),
        one,
    ]  # fmt: skip
    for result in moved:
        assert text_of([result]) == fresh_text_of([result])


def test_layouts_kept_stop_at_their_bound_and_the_rest_read_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Which families a site's samples are, and where, is shared by the sites with the
    same (`MAX_LAYOUTS` of them): past the bound each site's is made anew, and reads the
    same, at its first writing and at the next."""
    both = results()
    expected = fresh_text_of(both)
    monkeypatch.setattr(writer.TEXTS, "layouts", {})
    monkeypatch.setattr(writer.TEXTS, "max_layouts", 0)
    assert [fresh_text_of(both), text_of([anew(result) for result in both])] == [expected] * 2
    assert writer.TEXTS.layouts == {}


def test_only_the_last_scrapes_sites_are_kept() -> None:
    """A site no longer scraped (removed at a reload) is not held: what is kept is the
    last scrape's texts, and a site back again reads as written anew."""
    both = results()
    text_of(both)
    text_of(both[1:])
    assert list(writer.TEXTS.sites) == [writer._site_pairs("other shop", both[1].labels)]
    assert text_of(both) == fresh_text_of(both)


def test_scrapes_written_at_once_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scrape whose sites are written while another's are (two threads) finds nothing
    kept and writes every line; each reads as written alone, and so does the next."""
    both = results()
    expected = fresh_text_of(both)
    text_of(both)  # the texts kept
    inner: list[bytes] = []
    site_texts = writer.TEXTS.site_texts

    def meanwhile(*arguments: Any) -> Any:
        if not inner:  # another scrape, written in full while the first site is
            inner.append(b"")
            assert writer.TEXTS.sites == {}
            inner[0] = text_of([anew(result) for result in both])
        return site_texts(*arguments)

    monkeypatch.setattr(writer.TEXTS, "site_texts", meanwhile)
    assert text_of(both) == expected
    assert inner == [expected]
    monkeypatch.setattr(writer.TEXTS, "site_texts", site_texts)
    assert text_of(both) == expected


def test_a_protobuf_scrape_lets_go_of_the_texts() -> None:
    """A scraper that asks for protobuf would not read the texts again soon: a text
    scrape's (a `curl`'s) are let go of."""
    both = results()
    render(both, None)
    assert writer.TEXTS.sites
    render(both, NATIVE_ACCEPT)
    assert writer.TEXTS.sites == {}


def test_label_texts_kept_stop_at_their_bound_and_the_rest_read_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hook and group names are data: past `MAX_LABEL_TEXTS` label sets, no more texts are
    kept, and the sets written after that read as they did before."""
    found = [anew(result) for result in results()]
    monkeypatch.setattr(writer, "_LABEL_TEXTS", {})
    expected = fresh_text_of(found)
    unbounded = len(writer._LABEL_TEXTS)
    assert unbounded > 3
    monkeypatch.setattr(writer, "_LABEL_TEXTS", {})
    monkeypatch.setattr(writer, "MAX_LABEL_TEXTS", 3)
    assert [fresh_text_of([anew(result) for result in found]) for _ in range(2)] == [expected] * 2
    assert len(writer._LABEL_TEXTS) == 3


def test_a_sample_with_labels_not_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="not declared"):
        sample(catalog.FAILED_BY_HOOK, 1, group="x")
    with pytest.raises(ValueError, match="missing"):
        sample(catalog.FAILED_BY_HOOK, 1)
    with pytest.raises(ValueError, match="not declared"):
        sample(catalog.UP, 1, hook="x")
    assert sample(catalog.FAILED_BY_HOOK, 2, hook="h").labels == (("hook", "h"),)


def _process_families(
    body: bytes, content_type: str
) -> dict[str, tuple[str, str, dict[str, float]]]:
    parse = text_string_to_metric_families if "openmetrics" in content_type else parse_text
    return {
        family.name: (family.type, family.documentation, {s.name: s.value for s in family.samples})
        for family in parse(body.decode())
        if family.name.startswith("process_")
    }


@pytest.mark.parametrize("accept", [None, PROMETHEUS_ACCEPT])
def test_the_process_metrics_are_what_prometheus_clients_collector_reports(
    accept: str | None,
) -> None:
    """`exposition.process` reads them more cheaply than prometheus-client's
    ProcessCollector: the same families, types, help and samples, values alike."""
    body, content_type = render([], accept)
    ours = _process_families(body, content_type)
    reference = _process_families(*render_with_library([], accept))
    assert len(ours) == 6 and ours.keys() == reference.keys()
    for name, (kind, help_text, values) in ours.items():
        other_kind, other_help, other_values = reference[name]
        assert (kind, help_text, values.keys()) == (other_kind, other_help, other_values.keys())
    value = {name: next(iter(values.values())) for name, (_, _, values) in ours.items()}
    expected = {name: next(iter(values.values())) for name, (_, _, values) in reference.items()}
    for exact in ("process_start_time_seconds", "process_max_fds"):
        assert value[exact] == expected[exact]
    for moving, within in (
        ("process_virtual_memory_bytes", 64 << 20),
        ("process_resident_memory_bytes", 64 << 20),
        ("process_cpu_seconds", 5.0),
        ("process_open_fds", 5),
    ):
        assert abs(value[moving] - expected[moving]) <= within, moving


def test_the_process_cpu_is_read_afresh_at_each_scrape() -> None:
    """/proc/self/stat is read from a descriptor kept open: each reading is the process's
    state then, not the one of the first."""

    def cpu_seconds() -> float:
        return next(item.value for item in process_samples() if item.name == "process_cpu_seconds")

    first = cpu_seconds()
    give_up = time.monotonic() + 30
    while cpu_seconds() == first and time.monotonic() < give_up:
        sum(range(10_000))  # CPU time, counted in ticks of 10 ms
    assert cpu_seconds() > first
    # A descriptor closed behind its back is opened again.
    assert process._stat_file is not None
    os.close(process._stat_file[1])
    assert cpu_seconds() >= first


def test_a_sample_without_a_site_is_written_as_its_own_value() -> None:
    """Its line is made once per value as written: 0.0 and -0.0, 1 and 1.0 are equal,
    and their lines are not."""
    for value, written in ((0.0, "0.0"), (-0.0, "-0.0"), (1.0, "1.0"), (1, "1"), (0.0, "0.0")):
        extra = [(catalog.BUILD_INFO, (("version", "1"),), value)]
        text = writer.encode([], catalog.ALL, extra, openmetrics=False).decode()
        assert text.splitlines()[-1] == f'{catalog.BUILD_INFO.sample_name}{{version="1"}} {written}'
