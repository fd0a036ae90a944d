"""The rule files: valid, unit-tested by promtool, tied to the metric list and runbooks."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter import catalog
from testbed.rules import RUNBOOK_BASE, render, scale_expression, seconds

ROOT = Path(__file__).resolve().parent.parent
RULES = sorted((ROOT / "rules").glob("*.rules.yml"))
RULE_TESTS = sorted((ROOT / "rules" / "tests").glob("*.test.yml"))
RUNBOOKS = ROOT / "docs" / "runbooks"
METRICS_DOC = ROOT / "docs" / "metrics.md"
# Alerts about the exporter as a whole: no site, and no value worth printing.
WITHOUT_SITE = {"ActionSchedulerExporterDown", "ActionSchedulerMetricsAbsent"}
_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool is not installed: run `make test`, which installs it")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)


def rules() -> list[dict[str, Any]]:
    return [
        rule
        for path in RULES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
    ]


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def test_promtool_checks_the_rules() -> None:
    checked = promtool("check", "rules", *map(str, RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_unit_tests_pass() -> None:
    tested = promtool("test", "rules", *map(str, RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for path in RULE_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            alert_tests = test.get("alert_rule_test", [])
            for case in alert_tests:
                (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
                for expected in case.get("exp_alerts", []):
                    assert {"summary", "description", "runbook_url"} <= set(
                        expected.get("exp_annotations", {})
                    ), case["alertname"]
            # A near miss is also an input series that the expected alerts leave out.
            named = {case["alertname"] for case in alert_tests}
            if len(test["input_series"]) > sum(len(c.get("exp_alerts", [])) for c in alert_tests):
                quiet |= named
    names = {rule["alert"] for rule in alerts()}
    assert fired == names
    assert quiet == names


def referenced_names(expression: str) -> set[str]:
    """Metric and recording-rule names a PromQL expression selects."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expression)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\boffset\s+[0-9a-z]+", "", text)  # offsets
    text = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text
    )  # label lists
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        word = match.group(0)
        if rest.startswith("(") or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names


def exported_series() -> set[str]:
    names = set()
    for metric in catalog.ALL:
        names.add(metric.sample_name)
        if metric.kind == "histogram":
            names |= {f"{metric.name}_{suffix}" for suffix in ("bucket", "sum", "count")}
    return names


def external_series() -> set[str]:
    """Series from elsewhere that the rules use, as docs/metrics.md lists them."""
    section = METRICS_DOC.read_text().split("## Series from elsewhere", 1)[1].split("\n## ")[0]
    return set(re.findall(r"^\| `([a-zA-Z_]+)` \|", section, flags=re.MULTILINE))


def test_every_rule_uses_only_series_that_exist() -> None:
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    known = exported_series() | recorded | external_series()
    for rule in rules():
        unknown = referenced_names(str(rule["expr"])) - known
        assert not unknown, (rule.get("alert") or rule.get("record"), unknown)


def test_the_name_finder_finds_names() -> None:
    assert referenced_names(
        'sum without (hook) (rate(a_total{x="y"}[5m])) > on (site) group_left () b'
        " unless c:d:e offset 5m"
    ) == {"a_total", "b", "c:d:e"}


def test_recording_rules_follow_the_naming_convention() -> None:
    for rule in rules():
        if "record" in rule:
            level, metric, operations = rule["record"].split(":")
            assert level and metric.startswith("actionscheduler_") and operations


def test_every_alert_is_annotated_and_has_a_runbook() -> None:
    pages = {path.name for path in RUNBOOKS.glob("*.md")} - {"README.md"}
    linked = set()
    for alert in alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in {"warning", "critical"}, name
        annotations = alert["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(annotations), name
        if name not in WITHOUT_SITE:
            assert "$labels.site" in annotations["description"], name
            assert "$value" in annotations["description"], name
        url = annotations["runbook_url"]
        assert url.startswith(RUNBOOK_BASE), name
        page = url.removeprefix(RUNBOOK_BASE)
        assert page in pages, (name, page)
        assert name in (RUNBOOKS / page).read_text(), (name, page)
        linked.add(page)
    assert linked == pages


def test_render_shortens_every_duration_and_keeps_the_rest(tmp_path: Path) -> None:
    assert seconds("1h30m") == 5400
    assert (
        scale_expression("rate(x[15m]) - (y offset 30m)", 1 / 60) == "rate(x[15s]) - (y offset 30s)"
    )
    document = yaml.safe_load(RULES[0].read_text())
    rendered = render(document, 1 / 60, "https://wiki.example/runbooks/")
    path = tmp_path / "scaled.rules.yml"
    path.write_text(yaml.safe_dump(rendered))
    assert promtool("check", "rules", str(path)).returncode == 0
    scaled_alerts = [
        rule for group in rendered["groups"] for rule in group["rules"] if "alert" in rule
    ]
    assert {rule.get("for", "0s") for rule in scaled_alerts} <= {"0s", "1s", "5s", "10s", "15s"}
    assert all(
        rule["annotations"]["runbook_url"].startswith("https://wiki.example/runbooks/")
        for rule in scaled_alerts
    )
