"""The monitoring mixin: generated from the shipped rules and dashboards, evaluated by the
real jsonnet (PyPI's `jsonnet`), equal to them with its default `_config`, promtool-clean,
and tuned by `_config` as kube-prometheus users tune mixins."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import _jsonnet
import pytest
import yaml

from dashboards import build as dashboards_build
from mixin import build
from tests.support.prometheus import promtool_run

ROOT = Path(__file__).resolve().parent.parent
MIXIN = ROOT / "mixin"
SELECTOR = 'job="as-exporter", namespace="shop"'


def evaluate(config: str = "{}") -> dict[str, Any]:
    """The mixin's three outputs, as a kube-prometheus pipeline reads them."""
    snippet = (
        f"local mixin = (import 'mixin.libsonnet') + {{ _config+:: {config} }};\n"
        "{ alerts: mixin.prometheusAlerts, rules: mixin.prometheusRules,"
        " dashboards: mixin.grafanaDashboards }"
    )
    evaluated: dict[str, Any] = json.loads(
        _jsonnet.evaluate_snippet("test", snippet, jpathdir=[str(MIXIN)])
    )
    return evaluated


def shipped_groups() -> list[dict[str, Any]]:
    return [
        group for path in build.RULE_FILES for group in yaml.safe_load(path.read_text())["groups"]
    ]


def expressions(output: dict[str, Any]) -> list[str]:
    return [
        rule["expr"]
        for kind in ("alerts", "rules")
        for group in output[kind]["groups"]
        for rule in group["rules"]
    ]


def test_the_committed_jsonnet_is_what_the_generator_writes() -> None:
    for name, text in build.rendered().items():
        assert (MIXIN / name).read_text() == text, f"mixin/{name}: run python -m mixin"


def test_with_the_default_config_it_is_the_shipped_rules_and_dashboards() -> None:
    output = evaluate()
    alerting = output["alerts"]["groups"]
    recording = output["rules"]["groups"]
    assert alerting + recording == [
        *(g for g in shipped_groups() if any("alert" in r for r in g["rules"])),
        *(g for g in shipped_groups() if not any("alert" in r for r in g["rules"])),
    ]
    assert recording and all("record" in r for g in recording for r in g["rules"])
    for name, text in dashboards_build.rendered().items():
        assert output["dashboards"][name] == json.loads(text), name


UNIT_TESTS = ("alerts.test.yml", "recording.test.yml")
# Every job the unit tests give the exporter's series (kube-state-metrics' and KEDA's
# series have other jobs, and the selector leaves them alone).
TEST_JOBS = 'job=~"actionscheduler|actionscheduler-exporter|as"'


@pytest.mark.parametrize("config", ["{}", f"{{ actionschedulerSelector: '{TEST_JOBS}' }}"])
def test_the_shipped_unit_tests_pass_on_its_output(config: str, tmp_path: Path) -> None:
    """The kube-prometheus pipeline's result behaves as the shipped rules do: promtool runs
    rules/tests' unit tests on the evaluated alerts and rules, also with a selector that
    matches the tests' exporter jobs (which shows that the selector keeps the joins)."""
    output = evaluate(config)
    for kind in ("alerts", "rules"):
        (tmp_path / f"{kind}.yaml").write_text(yaml.safe_dump(output[kind]))
    for name in UNIT_TESTS:
        document = yaml.safe_load((ROOT / "rules" / "tests" / name).read_text())
        document["rule_files"] = ["alerts.yaml", "rules.yaml"]
        (tmp_path / name).write_text(yaml.safe_dump(document, sort_keys=False))
    tested = promtool_run("test", "rules", *(str(tmp_path / name) for name in UNIT_TESTS))
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]


def test_a_selector_that_matches_no_exporter_silences_the_alerts(tmp_path: Path) -> None:
    """The counterpart: with a selector the tests' series do not match, the alerts that
    must fire in the unit tests do not (so the selector does reach the expressions)."""
    output = evaluate("{ actionschedulerSelector: 'job=\"elsewhere\"' }")
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump(output["alerts"]))
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(output["rules"]))
    document = yaml.safe_load((ROOT / "rules" / "tests" / "alerts.test.yml").read_text())
    document["rule_files"] = ["alerts.yaml", "rules.yaml"]
    (tmp_path / "alerts.test.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    tested = promtool_run("test", "rules", str(tmp_path / "alerts.test.yml"))
    assert tested.returncode != 0
    assert "ActionSchedulerSiteDown" in tested.stdout + tested.stderr


@pytest.mark.parametrize("config", ["{}", f"{{ actionschedulerSelector: '{SELECTOR}' }}"])
def test_promtool_checks_its_alerts_and_rules(config: str, tmp_path: Path) -> None:
    output = evaluate(config)
    files = []
    for kind in ("alerts", "rules"):
        path = tmp_path / f"{kind}.yaml"
        path.write_text(yaml.safe_dump(output[kind]))
        files.append(str(path))
    # Both at once: promtool also refuses a group name used twice.
    checked = promtool_run("check", "rules", *files)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


OURS = re.compile(
    r"(?<![\w:\"])((?:[a-z_]+:)?actionscheduler_[a-z0-9_:]+|up)(?![\w:(\"])(\{[^}]*\})?"
)


def selects_with_the_selector(old: str, new: str) -> bool:
    """Whether `new` is `old` with SELECTOR on every selector of the exporter's series
    (kube-state-metrics' and KEDA's are left alone, and so is the recording that
    aggregates the target labels away); True when there was one to scope."""
    assert new.replace(SELECTOR + ",", "").replace("{" + SELECTOR + "}", "") == old
    scoped = [
        (name, braces)
        for name, braces in OURS.findall(new)
        if name != "site_workload:actionscheduler_worker_info:max"
    ]
    for name, braces in scoped:
        assert braces.startswith("{" + SELECTOR), (name, new)
    assert (old != new) == bool(scoped), new
    return bool(scoped)


def test_a_selector_in_config_reaches_every_selector_of_the_exporters_series() -> None:
    default, scoped = evaluate(), evaluate(f"{{ actionschedulerSelector: '{SELECTOR}' }}")
    pairs = list(zip(expressions(default), expressions(scoped), strict=True))
    unchanged = [new for old, new in pairs if not selects_with_the_selector(old, new)]
    # Only the alert on KEDA's errors, joined through that recording, selects none.
    assert len(unchanged) == 1 and "keda_scaled_object_errors" in unchanged[0]
    alert = next(
        rule
        for group in scoped["alerts"]["groups"]
        for rule in group["rules"]
        if rule.get("alert") == "ActionSchedulerSiteDown"
    )
    assert alert["expr"] == f"actionscheduler_up{{{SELECTOR}}} == 0"
    # The dashboards' queries and variables too.
    for name, dashboard in scoped["dashboards"].items():
        before = default["dashboards"][name]
        queries = [
            (old["expr"], new["expr"])
            for old_panel, new_panel in zip(before["panels"], dashboard["panels"], strict=True)
            for old, new in zip(old_panel["targets"], new_panel["targets"], strict=True)
        ]
        queries += [
            (old["definition"], new["definition"])
            for old, new in zip(
                before["templating"]["list"], dashboard["templating"]["list"], strict=True
            )
            if new["type"] == "query"
        ]
        assert sum(selects_with_the_selector(old, new) for old, new in queries) > len(queries) / 2
    overview = scoped["dashboards"]["actionscheduler-overview.json"]
    sites = next(v for v in overview["templating"]["list"] if v["name"] == "site")
    assert sites["definition"] == (
        f'label_values(actionscheduler_up{{{SELECTOR},cluster=~"$cluster"}}, site)'
    )


def test_durations_thresholds_tags_and_uids_come_from_config() -> None:
    output = evaluate(
        "{ alertFor+: { ActionSchedulerSiteDown: '15m' },"
        " thresholds+: { hookFailureRatioMinFailures: 10 },"
        " runbookURLPrefix: 'https://wiki.example/runbooks/',"
        " dashboardTags: ['shop'], dashboardUidPrefix: 'agency-' }"
    )
    rules = {r["alert"]: r for g in output["alerts"]["groups"] for r in g["rules"] if "alert" in r}
    assert rules["ActionSchedulerSiteDown"]["for"] == "15m"
    assert rules["ActionSchedulerQueueStalled"]["for"] == "5m"
    assert "[15m])) >= 10" in rules["ActionSchedulerHookFailureRatio"]["expr"]
    assert all(
        rule["annotations"]["runbook_url"].startswith("https://wiki.example/runbooks/")
        for rule in rules.values()
    )
    for name, dashboard in output["dashboards"].items():
        assert dashboard["uid"] == "agency-" + name.removesuffix(".json")
        assert dashboard["tags"] == ["shop"]
        for link in dashboard["links"]:
            assert link["url"].startswith(("/d/agency-", "https://wiki.example/")), link
        for panel in dashboard["panels"]:
            for link in panel.get("links", []):
                assert link["url"].startswith("https://wiki.example/runbooks/")


def test_it_can_be_vendored_with_jsonnet_bundler() -> None:
    manifest = json.loads((MIXIN / "jsonnetfile.json").read_text())
    assert manifest["version"] == 1 and manifest["dependencies"] == []
    readme = (MIXIN / "README.md").read_text()
    assert "jb install" in readme
    # The jsonnetfile the README shows is one jb reads: the mixin's folder as a subdir.
    [shown] = re.findall(r"```json\n(.*?)```", readme, re.DOTALL)
    [dependency] = json.loads(shown)["dependencies"]
    assert dependency["source"]["git"]["subdir"] == "mixin"
    # ... and its import line names the file that exists.
    imported = re.search(r"import '([^']+)/mixin.libsonnet'", readme)
    assert imported and imported.group(1) == dependency["name"]
