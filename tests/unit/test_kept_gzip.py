"""The gzip coding that keeps each part's deflated bytes while its pieces' marks stay the
same (`web.kept_gzip`): whatever is kept, the answer is one valid gzip member of the whole
text, as a fresh coding of it reads."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import itertools
import platform
import random
import zlib
from collections.abc import Iterator

import pytest

from actionscheduler_exporter.exposition import protobuf, render, writer
from actionscheduler_exporter.exposition.family_parts import SITES_PER_PART, Gathering, Part
from actionscheduler_exporter.exposition.kept_texts import KeptTexts
from actionscheduler_exporter.exposition.process import process_samples
from actionscheduler_exporter.exposition.render import render_parts
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.web import deflaters, kept_gzip
from actionscheduler_exporter.web.deflaters import INSTALLED, Deflater, combined_over_zeros
from actionscheduler_exporter.web.kept_gzip import KeptGzip
from testbed.accept_headers import NATIVE_ACCEPT, PROMETHEUS_ACCEPT
from tests.unit.test_writer import anew, results

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def lines(count: int, seed: int) -> bytes:
    rows = random.Random(seed)
    return b"".join(
        b'actionscheduler_due_actions{site="db%d"} %d\n' % (rows.randrange(1000), rows.random())
        for _ in range(count)
    )


@pytest.fixture(autouse=True, params=INSTALLED, ids=lambda deflater: deflater.name)
def deflater(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Deflater:
    """Every test with each deflating library installed (ISA-L's and zlib's), as the
    answers' coder."""
    chosen: Deflater = request.param
    monkeypatch.setattr(deflaters, "CHOSEN", chosen)
    return chosen


def test_isal_is_installed_where_pyproject_installs_it() -> None:
    """Where pyproject.toml's marker installs python-isal (its wheels' machines), both
    libraries are tested; elsewhere zlib alone."""
    wheels = platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64")
    assert [found.name for found in INSTALLED] == (["isal", "zlib"] if wheels else ["zlib"])


def m(*pieces: bytes) -> Part:
    """A part whose pieces are their own marks (as a family's head is)."""
    return Part(pieces, pieces)


def answer(coder: KeptGzip, parts: list[Part], kind: str = TEXT) -> tuple[bytes, list[bytes]]:
    """The coded answer, and its pieces as given out (each part's deflated bytes)."""
    given = list(coder.gzipped(parts, kind))
    return b"".join(given), given


def recorded(parts: Iterator[Part], texts: list[bytes]) -> Iterator[Part]:
    """The parts, each one's text added to `texts` as it is taken."""
    for part in parts:
        texts.append(b"".join(part))
        yield part


def deflations(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The texts of the parts deflated from now on."""
    made: list[bytes] = []
    deflate = kept_gzip._deflated

    def counted(part: Part, compressor: object, deflater: Deflater) -> object:
        made.append(b"".join(part))
        return deflate(part, compressor, deflater)  # type: ignore[arg-type]

    monkeypatch.setattr(kept_gzip, "_deflated", counted)
    return made


def test_the_answer_reads_as_the_whole_text_whatever_was_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 40: a part whose pieces' marks are those of the part at its place in the
    last answer is sent as deflated then, the others deflated anew; the stream reads as the
    whole text (its CRC-32 and length right, which Prometheus' reader checks) when every
    part is new, when every part is kept, when one in the middle changed, when parts
    come or go, with empty pieces and parts, and with a part longer than the run of
    zeros its CRC-32 is carried through."""
    head, empty, long = b"# HELP x y\n# TYPE x gauge\n", b"", lines(20_000, 9)
    assert len(long) > len(deflaters._ZEROS)
    texts = [lines(count, seed) for seed, count in enumerate((3, 50, 1, 400, 7))]
    coder = KeptGzip()
    made = deflations(monkeypatch)
    first = [m(head, texts[0]), m(texts[1], empty, texts[2]), m(), m(long), m(*texts[3:])]
    body, _ = answer(coder, first)
    assert gzip.decompress(body) == b"".join(piece for part in first for piece in part)
    assert len(made) == len(first)

    made.clear()
    again, _ = answer(coder, [Part(part, part.marks) for part in first])  # new parts
    assert again == body and made == []

    changed = lines(50, 99)
    second = [first[0], m(changed, empty, texts[2]), m(), m(long), m(*texts[3:]), m(head)]
    body, _ = answer(coder, second)
    assert gzip.decompress(body) == b"".join(piece for part in second for piece in part)
    assert made == [b"".join(second[1]), head]

    made.clear()
    third = [first[0], m(long), m(*texts[3:])]  # parts gone: each at another place
    body, _ = answer(coder, third)
    assert gzip.decompress(body) == b"".join(piece for part in third for piece in part)
    assert made == [long, b"".join(texts[3:])]
    assert zlib.decompress(body, 16 + zlib.MAX_WBITS) == gzip.decompress(body)


def test_a_part_is_taken_again_only_from_the_kept_texts_it_was_told_against(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer's part tells whether a piece was written anew since the writer's kept
    texts it took, and which generation of them that was: it is taken as deflated only
    from the answer that left that generation (two scrapes at once, or one of another
    coding between, leave other ones), and only when none of its pieces is fresh. A part
    without marks (the process's own metrics) is deflated every time."""
    coder = KeptGzip()
    made = deflations(monkeypatch)
    steady, changing = lines(8, 1), lines(8, 2)
    unmarked = Part([lines(3, 7)])

    def told(piece: bytes, fresh: bool, generations: tuple[int, int]) -> Part:
        return Part([piece], ("site",), fresh, generations)

    answer(coder, [told(steady, True, (0, 1)), told(changing, True, (0, 1)), unmarked])
    assert len(made) == 3
    made.clear()
    answer(coder, [told(steady, False, (1, 2)), told(changing, True, (1, 2)), unmarked])
    assert made == [changing, unmarked[0]]
    made.clear()
    # Told against generation 5: another answer left it, not this coder's last (2).
    answer(coder, [told(steady, False, (5, 6)), told(changing, False, (5, 6))])
    assert made == [steady, changing]
    made.clear()
    body, _ = answer(coder, [told(steady, False, (6, 7)), told(changing, False, (6, 7))])
    assert made == [] and gzip.decompress(body) == steady + changing


@pytest.mark.parametrize("accept", [None, PROMETHEUS_ACCEPT, NATIVE_ACCEPT])
def test_the_writers_parts_are_kept_while_their_sites_are_the_same(
    accept: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: what the writers give out is kept as it is: a thousand quiet stores'
    next answer deflates only the parts of the families that changed. Here 70 sites (two
    parts per family): answered again with the same samples, only the process's own
    metrics are deflated again; with one site's `up` changed, its part of that family
    too."""
    writer.TEXTS.take()
    protobuf.FIELDS.take()
    site = results()[0]
    found = [dataclasses.replace(site, label=f"site{index}") for index in range(70)]
    assert len(found) > SITES_PER_PART
    coder = KeptGzip()
    made = deflations(monkeypatch)

    def scrape(sites: list[SiteResult]) -> bytes:
        parts, content_type = render_parts(sites, accept)
        body, _ = answer(coder, list(parts), content_type)
        return body

    scrape(found)
    first = len(made)
    made.clear()
    # Equal samples made anew write the same pieces; a native histogram made anew is
    # encoded anew (its count says nothing of its buckets): in protobuf, the same ones.
    scrape(found if accept == NATIVE_ACCEPT else [anew(result) for result in found])
    assert len(made) == 1  # the process's own metrics
    made.clear()
    changed = [*found]
    up = [item.metric is catalog.UP for item in site.samples].index(True)
    samples = [*site.samples]
    samples[up] = dataclasses.replace(samples[up], value=0.0)
    changed[SITES_PER_PART] = dataclasses.replace(site, label="site64", samples=samples)
    body = scrape(changed)
    assert 2 <= len(made) < first / 10
    parts, _ = render_parts(changed, accept)
    plain = b"".join(b"".join(part) for part in parts)
    assert gzip.decompress(body).replace(b"\x00", b"")[:200] == plain.replace(b"\x00", b"")[:200]


@pytest.mark.parametrize("accept", [None, PROMETHEUS_ACCEPT, NATIVE_ACCEPT])
def test_sites_gathered_in_a_helper_process_join_as_one_processs_and_are_kept(
    accept: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`processes: 2`: a helper's sites, gathered with its own kept texts, join each
    family after the serving process's own, so that the answer reads as one process's
    of every site (each family whole, once); answered again with the same samples, only
    the process's own metrics are deflated again; with one of the helper's sites
    changed, only its part of that family (and the family's head, in protobuf)."""
    writer.TEXTS.take()
    protobuf.FIELDS.take()
    site = results()[0]
    found = [dataclasses.replace(site, label=f"site{index}") for index in range(100)]
    own, helped = found[:40], found[40:]
    content_type = render.negotiate(accept)
    helper_texts, helper_fields = copy.copy(writer.TEXTS), copy.copy(protobuf.FIELDS)
    helper_texts.forget()
    helper_fields.forget()

    def gathered_by_helper(sites: list[SiteResult]) -> Gathering:
        with monkeypatch.context() as helper:
            helper.setattr(writer, "TEXTS", helper_texts)
            helper.setattr(protobuf, "FIELDS", helper_fields)
            return render.gather(sites, content_type)

    coder = KeptGzip()
    made = deflations(monkeypatch)

    def scrape(helped: list[SiteResult]) -> list[Part]:
        parts, _ = render_parts(own, accept, others=[gathered_by_helper(helped)])
        given = list(parts)
        body, _ = answer(coder, given, content_type)
        assert gzip.decompress(body) == b"".join(b"".join(part) for part in given)
        return given

    def sites_text(parts: list[Part]) -> bytes:
        return b"".join(b"".join(part) for part in parts if part.marks is not None)

    whole = sites_text(list(render_parts(found, accept)[0]))  # one process's answer
    assert sites_text(scrape(helped)) == whole
    made.clear()
    again = helped if accept == NATIVE_ACCEPT else [anew(result) for result in helped]
    scrape(again)
    assert len(made) == 1  # the process's own metrics
    made.clear()
    up = [item.metric is catalog.UP for item in site.samples].index(True)
    samples = [*site.samples]
    samples[up] = dataclasses.replace(samples[up], value=0.0)
    changed = [*helped]
    changed[5] = dataclasses.replace(site, label="site45", samples=samples)
    scrape(changed)
    # Its part of `up` and the process's own metrics (in protobuf, the family's head is
    # as long as before: a double is eight bytes).
    assert len(made) == 2


def test_a_piece_written_anew_is_deflated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """What is kept is known by the pieces' marks and freshness, not by their bytes: a
    text written anew is deflated anew, whatever it reads, and is compared by nobody;
    a part of other sites' pieces at the place is deflated anew too."""
    coder = KeptGzip()
    made = deflations(monkeypatch)
    piece = lines(10, 1)
    answer(coder, [Part([piece], ("site",), False, (0, 1))])
    answer(coder, [Part([piece], ("site",), True, (1, 2))])
    body, _ = answer(coder, [Part([piece], ("other site",), False, (2, 3))])
    assert len(made) == 3
    assert gzip.decompress(body) == piece


def test_an_answer_of_another_type_or_not_taken_to_its_end_keeps_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scraper that asks for another format reads other parts at the same places; an
    answer whose client went before its end has not deflated the rest."""
    coder = KeptGzip()
    made = deflations(monkeypatch)
    parts = [m(lines(5, seed)) for seed in range(4)]
    answer(coder, parts)
    answer(coder, parts, OPENMETRICS)
    assert len(made) == 8
    made.clear()
    answer(coder, parts)
    assert len(made) == 4
    made.clear()
    stream = coder.gzipped(parts, TEXT)
    next(stream), next(stream)  # the head and the first part (kept), then the client goes
    stream.close()
    assert made == []
    answer(coder, parts)
    assert len(made) == 4


@pytest.mark.parametrize(
    "sizes", [(0, 0), (0, 5), (5, 0), (1, 1), (300_000, 7), (7, 600_000), (3, 262_144)]
)
def test_combined_is_the_crc_of_the_texts_one_after_the_other(
    sizes: tuple[int, int], deflater: Deflater
) -> None:
    rows = random.Random(sum(sizes))
    first, second = (rows.randbytes(size) for size in sizes)
    together = zlib.crc32(first + second)
    assert deflater.crc32(first + second) == together
    for combine in (deflater.crc32_combine, combined_over_zeros):
        assert combine(deflater.crc32(first), deflater.crc32(second), len(second)) == together


def test_scrapes_at_once_never_take_another_answers_coding() -> None:
    """Two text scrapes written at once, with other values, each finish in turn (the
    writer's kept texts left by one, the coder's by the other); the scrape after them
    reads as its own text, whichever was kept."""
    writer.TEXTS.take()
    site = results()[0]
    up = [item.metric is catalog.UP for item in site.samples].index(True)

    def sites(value: float) -> list[SiteResult]:
        samples = [*site.samples]
        samples[up] = dataclasses.replace(samples[up], value=value)
        return [
            dataclasses.replace(site, label=f"site{index}", samples=samples) for index in range(70)
        ]

    coder = KeptGzip()
    for first_ends_first in (True, False):
        written: list[list[bytes]] = [[], []]
        streams = [
            coder.gzipped(recorded(render_parts(sites(value), None)[0], texts), TEXT)
            for value, texts in zip((0.0, 1.0), written, strict=True)
        ]
        given: list[list[bytes]] = [[next(stream), next(stream)] for stream in streams]
        order = (0, 1) if first_ends_first else (1, 0)
        for index in order:
            given[index] += streams[index]
        for index in (0, 1):
            assert gzip.decompress(b"".join(given[index])) == b"".join(written[index])
        for value in (1.0, 0.0):
            texts: list[bytes] = []
            body, _ = answer(coder, list(recorded(render_parts(sites(value), None)[0], texts)))
            assert gzip.decompress(body) == b"".join(texts)
    # A scrape whose writer found nothing kept (another took it meanwhile) writes every
    # site anew and keeps its texts, coded elsewhere: the next answer's pieces are not
    # fresh against them, yet the coder's last answer had other values.
    answer(coder, list(render_parts(sites(0.0), None)[0]))
    writer.TEXTS.take()
    b"".join(b"".join(part) for part in render_parts(sites(1.0), None)[0])
    texts = []
    body, _ = answer(coder, list(recorded(render_parts(sites(1.0), None)[0], texts)))
    assert gzip.decompress(body) == b"".join(texts)


def test_a_site_whose_label_comes_twice_is_never_taken_for_the_other() -> None:
    """Two results under one label (a site named as another's subsite) with other
    values, spread over two parts: each scrape's answer reads as its own text."""
    writer.TEXTS.take()
    site = results()[0]
    up = [item.metric is catalog.UP for item in site.samples].index(True)
    coder = KeptGzip()

    def with_up(label: str, value: float) -> SiteResult:
        samples = [*site.samples]
        samples[up] = dataclasses.replace(samples[up], value=value)
        return dataclasses.replace(site, label=label, samples=samples)

    # The first's values at each scrape are the other's at the scrape before.
    for first, other in ((0.0, 1.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (1.0, 1.0)):
        found = [dataclasses.replace(site, label=f"site{index}") for index in range(70)]
        found[0], found[69] = with_up("site0", first), with_up("site0", other)
        texts: list[bytes] = []
        body, _ = answer(coder, list(recorded(render_parts(found, None)[0], texts)))
        assert gzip.decompress(body) == b"".join(texts)


@pytest.mark.parametrize("accept", [PROMETHEUS_ACCEPT, NATIVE_ACCEPT])
def test_a_family_whose_parts_grow_in_number_moves_no_other_familys_part(
    accept: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part is known by its place in the answer and its marks: when a site comes past
    a multiple of `SITES_PER_PART`, every family has a part more, and the next families'
    parts move onto places where other families' parts of the same sites were. Those
    are not taken for theirs: the answer reads as its text (here two sites a part)."""
    monkeypatch.setattr(writer, "ONE_PART_SITES", 0)
    monkeypatch.setattr("actionscheduler_exporter.exposition.family_parts.SITES_PER_PART", 2)
    writer.TEXTS.take()
    protobuf.FIELDS.take()
    site = results()[0]
    coder = KeptGzip()
    for names in ("abcd", "abcde", "abcdef", "abcd"):
        found = [dataclasses.replace(site, label=name) for name in names]
        parts, content_type = render_parts(found, accept)
        taken: list[bytes] = []
        body, _ = answer(coder, list(recorded(parts, taken)), content_type)
        assert gzip.decompress(body) == b"".join(taken)


def test_answers_of_changing_sites_read_as_their_texts_whatever_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sites coming and going, a site twice, samples changed one or many at a time (kept
    texts written into, or written anew), both text formats in turn: every answer reads
    as the text written anew, and parts are taken again from the last answer."""
    monkeypatch.setattr(writer, "ONE_PART_SITES", 0)
    monkeypatch.setattr("actionscheduler_exporter.exposition.family_parts.SITES_PER_PART", 2)
    made = deflations(monkeypatch)
    site = results()[0]
    taken_again = 0
    for seed in range(12):
        rows = random.Random(seed)
        writer.TEXTS.take()
        coder = KeptGzip()
        sites = {name: site for name in "abcdef"}
        for scrape in range(12):
            for name in sites:
                samples = [*sites[name].samples]
                for _ in range(rows.choice([0, 1, 1, 2, 30])):
                    place = rows.randrange(len(samples))
                    value = rows.choice([0.0, -0.0, 1, 1.0, 2.5, rows.random()])
                    samples[place] = dataclasses.replace(samples[place], value=value)
                sites[name] = dataclasses.replace(site, label=name, samples=samples)
            names = rows.sample(sorted(sites), rows.randrange(3, 7))
            found = [sites[name] for name in sorted(names)]
            if rows.random() < 0.2:
                found.append(found[0])
            openmetrics = scrape % 3 == 2
            parts = list(writer.families(found, catalog.ALL, [], openmetrics=openmetrics))
            text = b"".join(b"".join(part) for part in parts)
            assert text == written_anew(found, openmetrics, monkeypatch)
            made.clear()
            body, _ = answer(coder, parts, OPENMETRICS if openmetrics else TEXT)
            assert gzip.decompress(body) == text, (seed, scrape)
            taken_again += len(parts) - len(made)
    assert taken_again > 0


def written_anew(found: list[SiteResult], openmetrics: bool, mp: pytest.MonkeyPatch) -> bytes:
    """The writer's text of `found` with nothing kept, the texts kept left as they are."""
    with mp.context() as fresh:
        fresh.setattr(writer, "TEXTS", KeptTexts(writer._family_text, lines=True))
        parts = writer.families(found, catalog.ALL, [], openmetrics=openmetrics)
        return b"".join(b"".join(part) for part in parts)


def test_answers_in_formats_taken_in_turn_read_as_written_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every sequence of three scrapes over the text formats and protobuf, a value
    changed at each, through one gzip coding: each answer reads as its encoding with
    nothing kept (the process's own metrics held still to compare whole answers)."""
    monkeypatch.setattr(writer, "ONE_PART_SITES", 0)
    monkeypatch.setattr("actionscheduler_exporter.exposition.family_parts.SITES_PER_PART", 2)
    fixed = list(process_samples())
    monkeypatch.setattr(render, "process_samples", lambda: fixed)
    site = results()[0]
    formats = [None, PROMETHEUS_ACCEPT, NATIVE_ACCEPT, "text/plain; version=1.0.0"]
    for sequence in itertools.product(formats, repeat=3):
        writer.forget()
        protobuf.forget()
        coder = KeptGzip()
        samples = [*site.samples]
        for step, accept in enumerate(sequence):
            samples[step * 5] = dataclasses.replace(samples[step * 5], value=step + 0.5)
            found = [dataclasses.replace(site, label=name, samples=samples) for name in "abc"]
            with monkeypatch.context() as fresh:
                fresh.setattr(writer, "TEXTS", KeptTexts(writer._family_text, lines=True))
                fresh.setattr(
                    protobuf, "FIELDS", KeptTexts(protobuf._family_fields, protobuf._same_field)
                )
                anew_parts, _ = render_parts(found, accept)
                expected = b"".join(b"".join(part) for part in anew_parts)
            parts, content_type = render_parts(found, accept)
            body, _ = answer(coder, list(parts), content_type)
            assert gzip.decompress(body) == expected, (sequence, step)
