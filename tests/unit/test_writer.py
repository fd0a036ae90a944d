"""The exposition writer against prometheus-client's own encoders and parsers, from
results a scripted round produced (no server: the writer is pure)."""

from __future__ import annotations

import dataclasses

import pytest

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.collectors.log_events.histogram import Histogram
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import sample
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.timing import Deadline
from tests.support.clock import FakeClock
from tests.support.fake_session import FakeSession, healthy_store
from tests.support.reference_exposition import PROMETHEUS_ACCEPT, parsed, render_with_library

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
