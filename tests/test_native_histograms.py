"""Native histograms from a real store: the protobuf exposition decoded with Prometheus'
data model holds, per hook and per group, the buckets of the delays written; and Debian's
Prometheus, scraping with native histograms enabled, computes from them the quantiles and
fractions that the same delays give by hand (within a bucket of schema 3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from actionscheduler_exporter.exposition.render import PROTOBUF, render
from actionscheduler_exporter.metrics import catalog
from testbed.accept_headers import NATIVE_ACCEPT
from testbed.metrics_proto import decode
from testbed.store import ActionSchedulerStore
from tests.support import native_history
from tests.support.follower import Follow
from tests.support.http_server import RunningExporter
from tests.support.prometheus import Prometheus
from tests.unit.test_protobuf import native_buckets

DELAY = catalog.START_DELAY.name
BY_HOOK = catalog.START_DELAY_BY_HOOK.name
RUNS = catalog.RUN_DURATION.name


def histograms(body: bytes, name: str, label: str) -> dict[str, Any]:
    for family in decode(body):
        if family.name == name:
            return {
                next(pair.value for pair in metric.label if pair.name == label): metric.histogram
                for metric in family.metric
            }
    return {}


@pytest.mark.parametrize("classic", [True, False])
def test_the_protobuf_exposition_holds_each_delay_in_its_bucket(
    store: ActionSchedulerStore, follow: Follow, classic: bool
) -> None:
    exporter = follow(top_hooks=2, classic_histograms=classic)
    exporter.scrape()
    history = native_history.write(store, 150, top_hooks=2)
    result = exporter.scrape()
    body, content_type = render([result], NATIVE_ACCEPT)
    assert content_type == PROTOBUF
    for name, label, wanted in (
        (BY_HOOK, "hook", history.by_hook),
        (DELAY, "group", history.by_group),
        (RUNS, "hook", history.durations),
    ):
        found = histograms(body, name, label)
        assert set(found) == set(wanted), name
        for value, observed in wanted.items():
            h = found[value]
            zero, positive = native_history.native_counts(observed)
            assert (h.sample_count, h.sample_sum) == (len(observed), sum(observed))
            assert (h.schema, h.zero_threshold, h.zero_count) == (3, 0.5, zero)
            assert native_buckets(h) == positive
            # classic buckets beside the native ones while the setting says so; never by hook
            assert bool(h.bucket) == (classic and name != BY_HOOK)
    assert "other" in history.by_hook  # three hooks, two kept: the fold is exercised
    # the text exposition is the classic one whatever the setting, and has no by-hook delay
    text, _ = render([result], None)
    assert BY_HOOK.encode() not in text
    assert f'{DELAY}_bucket{{site="shop",group="imports",le="+Inf"}} '.encode() in text


QUANTILES = (0.25, 0.5, 0.9, 0.99)
# Powers of two and the zero threshold are bucket boundaries (exact); the others are not.
THRESHOLDS = (0.5, 1, 8, 64, 60, 100, 300)


def test_prometheus_computes_the_hand_quantiles_and_fractions_from_native_histograms(
    store: ActionSchedulerStore, exporter_http: Callable[..., RunningExporter], site: Any
) -> None:
    running = exporter_http(site(top_hooks=2))
    prometheus = Prometheus(
        [f"127.0.0.1:{running.port}"], flags=("--enable-feature=native-histograms",)
    )
    try:
        prometheus.wait_for("actionscheduler_up == 1")
        history = native_history.write(store, 200, top_hooks=2)
        prometheus.wait_for(f"sum(histogram_count({BY_HOOK})) == {history.count}")
        prometheus.wait_for(f"sum(histogram_count({DELAY})) == {history.count}")
        for name, label, wanted in (
            (BY_HOOK, "hook", history.by_hook),
            (DELAY, "group", history.by_group),
        ):
            for value, observed in wanted.items():
                selector = f'{name}{{{label}="{value}"}}'
                for q in QUANTILES:
                    (answer,) = prometheus.query(f"histogram_quantile({q}, {selector})")
                    measured = float(answer["value"][1])
                    low, high = native_history.bucket_bounds(native_history.quantile(observed, q))
                    assert low - 1e-9 <= measured <= high + 1e-9, (selector, q, measured)
                for upper in THRESHOLDS:
                    (answer,) = prometheus.query(f"histogram_fraction(0, {upper}, {selector})")
                    measured = float(answer["value"][1])
                    low, high = native_history.fraction_bounds(observed, upper)
                    assert low - 1e-9 <= measured <= high + 1e-9, (selector, upper, measured)
        # one series per histogram: Prometheus 2.42 stores the native form only, though the
        # exporter sends the classic buckets too (classic_histograms defaults to true)
        assert prometheus.query(f"count({BY_HOOK}_bucket)") == []
        assert prometheus.query(f"count({DELAY}_bucket)") == []
        assert prometheus.query(f"count({DELAY})")
    finally:
        prometheus.stop()
