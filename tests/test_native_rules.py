"""The rules, SLO rules and dashboard panels on native histograms: written from the classic
ones by one rewrite (rules/native.py) or from the same objectives (python -m slo), checked
by promtool, and evaluated by Debian's Prometheus on native histograms scraped from the
exporter to the values computed by hand from the same delays."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import build, hooks
from rules import native
from slo import __main__ as slo_main
from slo import objectives as objectives_file
from testbed.store import ActionSchedulerStore
from tests.support import native_history
from tests.support.http_server import RunningExporter
from tests.support.prometheus import Prometheus, promtool_run
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
NATIVE_RULES = sorted((ROOT / "rules" / "native").glob("*.rules.yml"))
DELAY = "actionscheduler_action_start_delay_seconds"


def test_promtool_checks_the_native_rule_files() -> None:
    assert [path.name for path in NATIVE_RULES] == [
        "actionscheduler-slo.rules.yml",
        "actionscheduler.rules.yml",
    ]
    checked = promtool_run("check", "rules", *map(str, NATIVE_RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_native_files_are_what_their_sources_write() -> None:
    assert native.main(["--check"]) == 0
    for name, text in build.rendered(build.NATIVE).items():
        assert (ROOT / "dashboards" / name).read_text() == text, name
        chart = ROOT / "helm" / "actionscheduler-exporter" / "files" / "dashboards" / name
        assert chart.read_text() == text, f"{name}: run make chart-files"


@pytest.mark.parametrize(
    ("classic", "expected"),
    [
        (
            f'histogram_quantile(0.9, sum by (le) (rate({DELAY}_bucket{{site=~"a"}}[5m])))',
            f'histogram_quantile(0.9, sum (rate({DELAY}{{site=~"a"}}[5m])))',
        ),
        (
            f"sum by (site, le) (rate({DELAY}_bucket[1h]))",
            f"sum by (site) (rate({DELAY}[1h]))",
        ),
        (
            f'sum(increase({DELAY}_count{{group="g"}}[1d])) / sum(rate({DELAY}_sum[5m]))',
            f'sum(histogram_count(increase({DELAY}{{group="g"}}[1d])))'
            f" / sum(histogram_sum(rate({DELAY}[5m])))",
        ),
        ("sum(rate(actionscheduler_actions_completed_total[5m]))", None),
    ],
)
def test_the_rewrite_reads_one_series_per_histogram(classic: str, expected: str | None) -> None:
    assert native.native_expression(classic) == (expected or classic)


def test_a_bucket_bound_has_no_native_form() -> None:
    with pytest.raises(native.NativeRewriteError, match="bucket bound"):
        native.native_expression(f'sum(rate({DELAY}_bucket{{le="300.0"}}[5m]))')


def value(prometheus: Prometheus, expression: str) -> float | None:
    answer = prometheus.query(expression)
    return float(answer[0]["value"][1]) if answer else None


def test_prometheus_evaluates_the_native_rules_to_the_hand_values(
    store: ActionSchedulerStore, exporter_http: Callable[..., RunningExporter], site: Any
) -> None:
    running = exporter_http(site())
    prometheus = Prometheus(
        [f"127.0.0.1:{running.port}"],
        rule_files=NATIVE_RULES,
        flags=("--enable-feature=native-histograms",),
    )
    try:
        prometheus.wait_for("actionscheduler_up == 1")
        # Every series first, so that a rate over the batch's window is its delays alone.
        seeded = native_history.seed_every_series(store)
        prometheus.wait_for(f"sum(histogram_count({DELAY})) == {seeded}")
        history = native_history.write(store, 160, top_hooks=len(native_history.HOOKS))
        prometheus.wait_for(f"sum(histogram_count({DELAY})) == {seeded + history.count}")
        delays = [delay for values in history.by_group.values() for delay in values]

        def recorded(expression: str, bounds: tuple[float, float]) -> bool:
            found = value(prometheus, expression)
            return found is not None and bounds[0] - 1e-9 <= found <= bounds[1] + 1e-9

        # the recordings are evaluated every second: wait for one after the batch
        for q in (0.5, 0.95, 0.99):
            series = f"site:{DELAY}:p{round(q * 100)}_rate5m"
            bounds = native_history.bucket_bounds(native_history.quantile(delays, q))
            assert wait_until(functools.partial(recorded, series, bounds), 30), (
                series,
                value(prometheus, series),
                bounds,
            )
        low, high = native_history.fraction_bounds(delays, 300)
        errors = 'slo:actionscheduler_sli_errors:ratio_rate5m{slo="start-on-time"}'
        assert wait_until(lambda: recorded(errors, (1 - high, 1 - low)), 30), (
            value(prometheus, errors),
            (1 - high, 1 - low),
        )
        # the native hooks dashboard's latency panels answer from the same series
        for panel in hooks.native_panels():
            for query in panel.queries:
                if "_seconds{" not in query.expr or "histogram" in query.expr:
                    continue
                expression = (
                    query.expr.replace("$__rate_interval", "5m")
                    .replace('=~"$cluster"', '=~".*"')
                    .replace('=~"$site"', '=~".*"')
                    .replace('=~"$hook"', '=~".*"')
                    .replace('=~"$group"', '=~".*"')
                )
                if "rate(" in expression and "seconds{" in expression:
                    assert prometheus.query(expression), (panel.title, expression)
    finally:
        prometheus.stop()


def test_native_objectives_take_any_within_seconds_and_classic_ones_refuse_it(
    tmp_path: Path,
) -> None:
    source = tmp_path / "mine.yml"
    document = yaml.safe_load(slo_main.SOURCE.read_text())
    document["defaults"]["startOnTime"]["withinSeconds"] = 45
    source.write_text(yaml.safe_dump(document))
    written = tmp_path / "slo.rules.yml"
    written.write_text(slo_main.native_rules(source, "mine.yml"))
    assert "histogram_fraction(0, 45, sum by (site)" in written.read_text()
    checked = promtool_run("check", "rules", str(written))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with pytest.raises(objectives_file.ObjectivesError, match="must be a bucket bound"):
        objectives_file.load(source)
    document["defaults"]["startOnTime"]["withinSeconds"] = 0
    source.write_text(yaml.safe_dump(document))
    with pytest.raises(objectives_file.ObjectivesError, match="a number of seconds above 0"):
        objectives_file.load(source, native=True)
