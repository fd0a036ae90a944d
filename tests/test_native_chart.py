"""The chart's one choice of histograms (`histograms: native`), rendered by the real Helm
engine: the rules, the SLO rules and the hooks dashboard on native histograms, each what
the repository's generators write; classic stays the default and unchanged."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from slo import objectives as objectives_file
from slo import prometheus_rules
from slo.__main__ import SOURCE
from tests.support.helm_chart import MINIMAL, find, merged, render, validate

ROOT = Path(__file__).resolve().parent.parent
NATIVE_RULES = ROOT / "rules" / "native" / "actionscheduler.rules.yml"


def with_everything(histograms: str | None, objectives: dict[str, Any] | None = None) -> Any:
    values = merged(
        MINIMAL,
        **{
            "prometheusRule.enabled": True,
            "dashboards.enabled": True,
            "slo.enabled": True,
            "slo.objectives": objectives or yaml.safe_load(SOURCE.read_text()),
        },
    )
    if histograms:
        values["histograms"] = histograms
    return values


def dashboard(objects: list[dict[str, Any]], name: str) -> Any:
    config_map = find(objects, "ConfigMap", f"-{name}")
    return json.loads(config_map["data"][f"actionscheduler-{name}.json"])


def expressions(document: Any) -> str:
    return json.dumps(document)


def test_native_reads_one_series_per_histogram_everywhere() -> None:
    objects = render(with_everything("native"))
    rules = find(objects, "PrometheusRule", "shop-actionscheduler-exporter")
    validate(rules)
    native = yaml.safe_load(NATIVE_RULES.read_text())
    assert [g["name"] for g in rules["spec"]["groups"]] == [g["name"] for g in native["groups"]]
    slo = find(objects, "PrometheusRule", "-slo")
    objectives = objectives_file.load(SOURCE, native=True)
    assert slo["spec"] == prometheus_rules.document(objectives, native=True)
    hooks = dashboard(objects, "hooks")
    for text in (expressions(rules["spec"]), expressions(slo["spec"]), expressions(hooks)):
        assert not re.search(r"actionscheduler_action_\w+_seconds_(bucket|count)", text)
    assert "histogram_fraction(0, 300," in expressions(slo["spec"])
    assert "actionscheduler_action_start_delay_by_hook_seconds" in expressions(hooks)
    assert hooks["uid"] == "actionscheduler-hooks"  # links from the other dashboards hold


def test_classic_is_the_default_and_unchanged() -> None:
    default = render(with_everything(None))
    classic = render(with_everything("classic"))
    assert default == classic
    slo = find(classic, "PrometheusRule", "-slo")
    assert slo["spec"] == prometheus_rules.document(objectives_file.load(SOURCE))
    hooks = dashboard(classic, "hooks")
    assert "actionscheduler_action_start_delay_seconds_bucket" in expressions(hooks)
    assert "start_delay_by_hook" not in expressions(hooks)


def test_native_lets_within_seconds_be_any_number_and_classic_refuses_it() -> None:
    objectives = yaml.safe_load(SOURCE.read_text())
    objectives["defaults"]["startOnTime"]["withinSeconds"] = 45
    slo = find(render(with_everything("native", objectives)), "PrometheusRule", "-slo")
    assert "histogram_fraction(0, 45, sum by (site)" in expressions(slo["spec"])
    with pytest.raises(helm.HelmError, match="must be a bucket bound"):
        render(with_everything("classic", objectives))
    objectives["defaults"]["startOnTime"]["withinSeconds"] = -1
    with pytest.raises(helm.HelmError, match="must be a number of seconds above 0, not -1"):
        render(with_everything("native", objectives))


def test_native_scoped_to_a_release_reads_native_histograms() -> None:
    values = merged(
        with_everything("native"),
        **{"prometheusRule.scope": "release", "serviceMonitor.enabled": True},
    )
    rules = find(render(values), "PrometheusRule", "shop-actionscheduler-exporter")
    text = expressions(rules["spec"])
    assert "rate(actionscheduler_action_start_delay_seconds{" in text
    assert "_seconds_bucket" not in text


def test_an_unknown_choice_and_pyrra_with_native_are_refused() -> None:
    with pytest.raises(helm.HelmError, match="histograms"):
        render(with_everything("exponential"))
    values = merged(with_everything("native"), **{"slo.format": "pyrra"})
    with pytest.raises(helm.HelmError, match="Pyrra's latency objectives read classic"):
        render(values)
