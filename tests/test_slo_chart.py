"""The chart's service level objectives, rendered by the real Helm engine: the same rules
and Pyrra resources as python -m slo writes from the same objectives, valid against the
CRDs, and bad objectives refused at render time naming the key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from actionscheduler_exporter.collectors.log_events.collector import START_DELAY_BUCKETS
from slo import objectives as objectives_file
from slo import prometheus_rules, pyrra
from slo.__main__ import EXAMPLE, SOURCE
from tests.support.helm_chart import CHART, MINIMAL, find, render, validate
from tests.support.prometheus import promtool_run

SOURCES = {"shipped": SOURCE, "example": EXAMPLE}


def with_slo(source: Path, form: str) -> dict[str, Any]:
    return {
        **MINIMAL,
        "slo": {
            "enabled": True,
            "format": form,
            "labels": {"release": "kube-prometheus-stack"},
            "objectives": yaml.safe_load(source.read_text()),
        },
    }


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_charts_rules_are_what_python_writes(source: str) -> None:
    objects = render(with_slo(SOURCES[source], "rules"))
    rule = find(objects, "PrometheusRule", "-slo")
    validate(rule)
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    expected = prometheus_rules.document(objectives_file.load(SOURCES[source]))
    assert rule["spec"] == expected


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_charts_pyrra_resources_are_what_python_writes(source: str) -> None:
    objects = render(with_slo(SOURCES[source], "pyrra"))
    rendered = [o for o in objects if o["kind"] == "ServiceLevelObjective"]
    for resource in rendered:
        validate(resource)
        assert resource["metadata"]["namespace"] == "shop"
    assert not [o for o in objects if o["kind"] == "PrometheusRule"]
    expected = pyrra.resources(objectives_file.load(SOURCES[source]))
    assert [(r["metadata"]["name"], r["spec"]) for r in rendered] == [
        (r["metadata"]["name"], r["spec"]) for r in expected
    ]


def test_names_with_regex_characters_render_as_python_writes_them(tmp_path: Path) -> None:
    """Site and group names go into regex matchers and resource names: escaped alike."""
    document = {
        "window": "30d",
        "minimumRuns": 5,
        "defaults": {
            "startOnTime": {"objective": 99.9, "withinSeconds": 0.5},
            "success": {"objective": 97},
        },
        "sites": {
            "network:wp_2.": {"success": {"objective": 99}},
            'sh"op': {},
            "shop\\": {},  # a trailing backslash
            "shop.a": {},  # meets shop-a's safe spelling
            "shop-a": {},
        },
        "groups": {"woo.webhooks+": {"startOnTime": {"withinSeconds": 86400}}},
    }
    source = tmp_path / "objectives.yml"
    source.write_text(yaml.safe_dump(document))
    objectives = objectives_file.load(source)
    written = tmp_path / "slo.rules.yml"
    written.write_text(yaml.safe_dump(prometheus_rules.document(objectives)))
    checked = promtool_run("check", "rules", str(written))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = find(render(with_slo(source, "rules")), "PrometheusRule", "-slo")
    assert rules["spec"] == prometheus_rules.document(objectives)
    rendered = [
        o for o in render(with_slo(source, "pyrra")) if o["kind"] == "ServiceLevelObjective"
    ]
    assert [(r["metadata"]["name"], r["spec"]) for r in rendered] == [
        (r["metadata"]["name"], r["spec"]) for r in pyrra.resources(objectives)
    ]
    names = [r["metadata"]["name"] for r in rendered]
    assert len(set(names)) == len(names), names


@pytest.mark.parametrize(("window", "percent"), [("1d", 90), ("7d", 99.9), ("100d", 99.95)])
def test_burn_rates_and_run_guards_render_as_python_writes_them(
    tmp_path: Path, window: str, percent: float
) -> None:
    """Windows where a burn rate is raised to 1.1 and guards above minimumRuns: the chart
    derives both as python -m slo does."""
    document = {
        "window": window,
        "minimumRuns": 3,
        "defaults": {
            "startOnTime": {"objective": percent, "withinSeconds": 300},
            "success": {"objective": percent},
        },
    }
    source = tmp_path / "objectives.yml"
    source.write_text(yaml.safe_dump(document))
    rules = find(render(with_slo(source, "rules")), "PrometheusRule", "-slo")
    assert rules["spec"] == prometheus_rules.document(objectives_file.load(source))


def test_the_chart_knows_the_start_delay_buckets() -> None:
    helpers = (CHART / "templates" / "_slo.tpl").read_text()
    line = helpers.split('define "ase.sloBuckets" -}}', 1)[1].split("{{", 1)[0]
    assert [float(bound) for bound in line.split()] == list(START_DELAY_BUCKETS)


def test_off_by_default() -> None:
    objects = render(MINIMAL)
    assert not [o for o in objects if o["kind"] == "ServiceLevelObjective"]
    assert not [o for o in objects if o["metadata"]["name"].endswith("-slo")]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {
                "defaults": {
                    "startOnTime": {"objective": 99, "withinSeconds": 240},
                    "success": {"objective": 99.5},
                }
            },
            "slo.objectives.defaults.startOnTime.withinSeconds: must be a bucket bound of"
            " actionscheduler_action_start_delay_seconds (0.5, 1, 5, 15, 30, 60, 120, 300, 600,"
            " 1800, 3600, 7200, 21600, 86400), not 240",
        ),
        (
            {"groups": {"checkout": {"startOnTime": {"withinSeconds": 45}}}},
            "slo.objectives.groups.checkout.startOnTime.withinSeconds: must be a bucket bound",
        ),
        ({"window": "4w"}, "slo.objectives.window: must be whole days"),
        (
            {"sites": {"shop\nmain": {}}},
            'slo.objectives.sites["shop\\nmain"]: must not hold control characters',
        ),
        (
            {"groups": {"mail-$window": {}}},
            'slo.objectives.groups["mail-$window"]: must not hold "$window"',
        ),
        (
            {
                "defaults": {
                    "startOnTime": {"objective": 100, "withinSeconds": 300},
                    "success": {"objective": 99.5},
                }
            },
            "slo.objectives.defaults.startOnTime.objective: must be a percentage",
        ),
        (
            {"sites": {"shop": {"latency": {}}}},
            "slo.objectives.sites.shop.latency: is not a known key",
        ),
    ],
)
def test_bad_objectives_are_refused_at_render_naming_the_key(
    change: dict[str, Any], message: str
) -> None:
    values = with_slo(SOURCE, "rules")
    values["slo"]["objectives"].update(change)
    with pytest.raises(helm.HelmError, match=re.escape(message)):
        render(values)


def test_an_unknown_format_is_refused() -> None:
    values = with_slo(SOURCE, "sloth")
    with pytest.raises(helm.HelmError, match=re.escape('slo.format is "sloth"')):
        render(values)
