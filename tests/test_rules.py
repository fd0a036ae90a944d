"""The rule files: valid, unit-tested by promtool, tied to the metric list and runbooks."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from slo import __main__ as slo_main
from testbed.rules import RUNBOOK_BASE, render, scale_expression, seconds
from tests.support.prometheus import RULE_TESTS, promtool, promtool_run
from tests.support.series import (
    RULES,
    exported_series,
    external_series,
    referenced_names,
    rules,
)

ROOT = Path(__file__).resolve().parent.parent
RUNBOOKS = ROOT / "docs" / "runbooks"
# Alerts about the exporter as a whole: no site, and no value worth printing.
WITHOUT_SITE = {"ActionSchedulerExporterDown", "ActionSchedulerMetricsAbsent"}


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def test_promtool_checks_the_rules() -> None:
    checked = promtool_run("check", "rules", *map(str, RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def documented_test_commands() -> set[str]:
    """The promtool command rules/README.md and the test files tell a reader to run."""
    texts = [ROOT / "rules" / "README.md", *RULE_TESTS]
    return {
        command
        for path in texts
        for command in re.findall(r"promtool test rules [^`\n]+", path.read_text())
    }


def test_promtool_unit_tests_pass_with_the_documented_command() -> None:
    """Issue 39, item 9: `promtool test rules rules/tests/*.yml`, as documented, also fed
    the SLO example's objectives and rules to promtool as tests, and failed. The command
    the docs show is run here verbatim, by a shell, from the repository's root."""
    [command] = documented_test_commands()
    assert sorted(ROOT.glob(command.split()[-1])) == RULE_TESTS
    environment = {**os.environ, "PATH": f"{Path(promtool()).parent}:{os.environ['PATH']}"}
    tested = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.count("SUCCESS") == len(RULE_TESTS)


def test_every_alert_is_in_the_threshold_table() -> None:
    """Issue 39, item 9: the table missed the per-group alerts. Every alert of
    actionscheduler.rules.yml has a row, with its severity and `for`; the SLO alerts are
    described in their own section."""
    readme = (ROOT / "rules" / "README.md").read_text()
    table = readme.split("## Alerts, thresholds and durations", 1)[1].split("\n\n| alert |")[1]
    rows = {
        cells[0]: cells
        for line in table.split("\n\n", 1)[0].splitlines()
        if (cells := [cell.strip() for cell in line.strip("|").split("|")])[0].startswith("Action")
    }
    main_file = yaml.safe_load((ROOT / "rules" / "actionscheduler.rules.yml").read_text())
    listed = [rule for group in main_file["groups"] for rule in group["rules"] if "alert" in rule]
    assert set(rows) == {rule["alert"] for rule in listed}
    for rule in listed:
        cells = rows[rule["alert"]]
        assert cells[1] == rule["labels"]["severity"], rule["alert"]
        assert cells[3] == rule.get("for", "—"), rule["alert"]
    slo_section = readme.split("## Service level objectives", 1)[1]
    for rule in alerts():
        assert rule["alert"] in rows or rule["alert"] in slo_section, rule["alert"]


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
    assert promtool_run("check", "rules", str(path)).returncode == 0
    scaled_alerts = [
        rule for group in rendered["groups"] for rule in group["rules"] if "alert" in rule
    ]
    assert {rule.get("for", "0s") for rule in scaled_alerts} <= {"0s", "1s", "5s", "10s", "15s"}
    assert all(
        rule["annotations"]["runbook_url"].startswith("https://wiki.example/runbooks/")
        for rule in scaled_alerts
    )


def test_the_low_traffic_case_is_quiet_because_of_the_minimum_runs(tmp_path: Path) -> None:
    """slo.test.yml's low-traffic site stays quiet; with the guard down to one run, the same
    series page: the guard, not the data, keeps one late run of five from paging."""
    objectives = yaml.safe_load(slo_main.EXAMPLE.read_text())
    objectives["minimumRuns"] = 1
    source = tmp_path / "objectives.yml"
    source.write_text(yaml.safe_dump(objectives))
    (tmp_path / "slo-example.rules.yml").write_text(
        slo_main.forms(source, "test")["actionscheduler-slo.rules.yml"]
    )
    suite = yaml.safe_load((ROOT / "rules" / "tests" / "slo.test.yml").read_text())
    (case,) = [test for test in suite["tests"] if "low-traffic" in test["name"]]
    for check in case["alert_rule_test"]:
        assert check["exp_alerts"] == []
    suite["tests"] = [case]
    (tmp_path / "low.test.yml").write_text(yaml.safe_dump(suite))
    tested = promtool_run("test", "rules", str(tmp_path / "low.test.yml"))
    assert tested.returncode != 0
    assert 'severity="critical", site="tiny"' in tested.stdout + tested.stderr
