"""The objectives and their forms: checks, the SRE workbook's burn rates, one source."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from slo import objectives as objectives_file
from slo import openslo, prometheus_rules, pyrra, queries, sloth
from slo.__main__ import EXAMPLE, SOURCE, shipped
from slo.objectives import Objectives, ObjectivesError, parse

ROOT = Path(__file__).resolve().parents[2]
# The SRE workbook, table 5-8 ("Recommended parameters for a 99.9 % SLO alerting
# configuration"), for a 30-day window: long window, short window, burn rate, budget spent.
WORKBOOK_30D = [
    ("page", "1h", "5m", 14.4, 0.02),
    ("page", "6h", "30m", 6.0, 0.05),
    ("ticket", "1d", "2h", 3.0, 0.10),
    ("ticket", "3d", "6h", 1.0, 0.10),
]
HOURS = {"1h": 1, "6h": 6, "1d": 24, "3d": 72}


def test_the_committed_forms_are_what_the_objectives_generate() -> None:
    for path, text in shipped().items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)}: run python -m slo"


def expected_burn_rates(window_days: int) -> dict[str, float]:
    """The workbook's burn rate for a long window, for any objective window: the same share
    of the budget spent in the long window, so the rate scales with the window's length;
    never below 1.1, where the threshold would be at or under the objective itself."""
    return {
        long: max(rate * (window_days * 24) / (30 * 24), 1.1)
        for _, long, _, rate, _ in WORKBOOK_30D
    }


def alerts_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


@pytest.mark.parametrize("source", [SOURCE, EXAMPLE], ids=["shipped", "example"])
def test_alert_thresholds_are_the_workbooks_for_each_objective(source: Path) -> None:
    objectives = objectives_file.load(source)
    document = prometheus_rules.document(objectives)
    burn = expected_burn_rates(objectives.window_days)
    if objectives.window_days == 30:  # the workbook's, with 1 raised to 1.1
        assert burn == {long: max(rate, 1.1) for _, long, _, rate, _ in WORKBOOK_30D}
    by_slo = {
        queries.slo_name(scope, name): (1 - queries.objective_of(scope, name) / 100)
        for scope in objectives.scopes
        for name in queries.SLIS
    }
    seen = set()
    for alert in alerts_of(document):
        severity = {"critical": "page", "warning": "ticket"}[alert["labels"]["severity"]]
        budget = by_slo[alert["labels"]["slo"]]
        pairs = re.findall(
            r"ratio_rate(\w+)\{[^}]*\} > \(([\d.]+) \* ([\d.]+)\)\n\s*and \S+ratio_rate(\w+)",
            alert["expr"],
        )
        assert len(pairs) == 2, alert["expr"]
        for long, rate, share, short in pairs:
            (expected,) = [w for w in WORKBOOK_30D if w[1] == long]
            assert expected[0] == severity and expected[2] == short
            assert float(rate) == pytest.approx(burn[long], abs=1e-6)
            assert float(share) == pytest.approx(budget)
            seen.add((alert["labels"]["slo"], long))
            # the same share of the budget, whatever the window (or more, where the rate
            # is raised to 1.1)
            spent = float(rate) * HOURS[long] / (objectives.window_days * 24)
            if float(rate) > 1.1:
                assert spent == pytest.approx(expected[4], rel=1e-5)
            else:
                assert spent >= expected[4] - 1e-9
    assert len(seen) == 4 * len(by_slo)


def test_a_28_day_window_scales_the_burn_rates() -> None:
    objectives = objectives_file.load(SOURCE)
    assert objectives.window == "28d"
    assert expected_burn_rates(28) == pytest.approx({"1h": 13.44, "6h": 5.6, "1d": 2.8, "3d": 1.1})


GUARD = re.compile(
    r"ratio_rate(\w+)\{[^}]*\} > \(([\d.]+) \* ([\d.]+)\)\n.*?\n.*?"
    r"\(increase\([^\n]*\[(\w+)\]\)\) >= (\d+)\n"
)


@pytest.mark.parametrize("days", [1, 3, 7, 14, 28, 30, 31, 90, 365])
@pytest.mark.parametrize("percent", [90, 99, 99.5, 99.9, 99.99])
def test_no_alert_fires_at_the_objective_nor_on_one_bad_run(days: int, percent: float) -> None:
    """Every condition of every window the objectives allow: its threshold is at least the
    budget (a ratio at the objective never exceeds it), and the runs it needs are enough
    that one bad run alone stays under the threshold, and no more than that or
    minimumRuns."""
    document = objectives_with(
        startOnTime={"objective": percent, "withinSeconds": 300},
        success={"objective": percent},
    )
    document["window"] = f"{days}d"
    objectives = parse(document)
    budget = 1 - percent / 100
    conditions = 0
    for alert in alerts_of(prometheus_rules.document(objectives)):
        for long, rate, share, guarded, runs in GUARD.findall(alert["expr"]):
            conditions += 1
            assert long == guarded
            assert float(share) == pytest.approx(budget)
            assert float(rate) >= 1.1
            limit = float(rate) * float(share)
            assert 1 / int(runs) <= limit * (1 + 1e-6), (alert["expr"], runs)
            assert int(runs) == objectives.minimum_runs or 1 / (int(runs) - 1) > limit
    assert conditions == 2 * 2 * 2 * len(objectives.scopes)


def objectives_with(**defaults: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "window": "28d",
        "defaults": {
            "startOnTime": {"objective": 99, "withinSeconds": 300},
            "success": {"objective": 99.5},
        },
    }
    document["defaults"].update(defaults)
    return document


def test_a_start_time_that_is_not_a_bucket_bound_is_refused_naming_the_bounds() -> None:
    with pytest.raises(ObjectivesError) as raised:
        parse(objectives_with(startOnTime={"objective": 99, "withinSeconds": 240}))
    assert raised.value.key == "defaults.startOnTime.withinSeconds"
    assert "0.5, 1, 5, 15, 30, 60, 120, 300, 600" in raised.value.problem
    assert "240" in raised.value.problem
    group = objectives_with()
    group["groups"] = {"checkout": {"startOnTime": {"withinSeconds": 45}}}
    with pytest.raises(ObjectivesError) as raised:
        parse(group)
    assert raised.value.key == "groups.checkout.startOnTime.withinSeconds"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"window": "4w"}, "window"),
        ({"window": "0d"}, "window"),
        ({"minimumRuns": 0}, "minimumRuns"),
        ({"defaults": {"success": {"objective": 99}}}, "defaults.startOnTime"),
        (
            {
                "defaults": {
                    "startOnTime": {"objective": 100, "withinSeconds": 300},
                    "success": {"objective": 99},
                }
            },
            "defaults.startOnTime.objective",
        ),
        (
            {
                "defaults": {
                    "startOnTime": {"objective": 99, "withinSeconds": 300},
                    "success": {"objective": "high"},
                }
            },
            "defaults.success.objective",
        ),
        ({"sites": {"shop": {"latency": {}}}}, "sites.shop.latency"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_objectives_are_refused_naming_the_key(change: dict[str, Any], key: str) -> None:
    document = objectives_with()
    document.update(change)
    with pytest.raises(ObjectivesError) as raised:
        parse(document)
    assert raised.value.key == key


def test_named_sites_and_groups_are_judged_apart_from_the_defaults() -> None:
    objectives = objectives_file.load(EXAMPLE)
    default, site, group = objectives.scopes
    assert queries.selection(objectives, default).matchers == (
        'site!~"wholesale"',
        'group!~"checkout"',
    )
    assert queries.selection(objectives, site).matchers == ('site="wholesale"', 'group!~"checkout"')
    assert queries.selection(objectives, group).grouping == ("site", "group")
    # a site that states one objective keeps the defaults' other
    assert site.success == default.success
    assert site.start_on_time.within_seconds == 3600


def test_names_with_regex_characters_are_escaped() -> None:
    objectives = parse({**objectives_with(), "sites": {"network:wp_2.": {}}})
    matcher = queries.selection(objectives, objectives.scopes[0]).matchers[0]
    assert matcher == 'site!~"network:wp_2\\\\."'


def forms_of(objectives: Objectives) -> dict[str, Any]:
    return {
        "rules": prometheus_rules.document(objectives),
        "sloth": sloth.document(objectives),
        "pyrra": pyrra.resources(objectives),
        "openslo": openslo.documents(objectives),
    }


@pytest.mark.parametrize("source", [SOURCE, EXAMPLE], ids=["shipped", "example"])
def test_the_four_forms_state_the_same_objectives(source: Path) -> None:
    objectives = objectives_file.load(source)
    forms = forms_of(objectives)
    records = [rule for group in forms["rules"]["groups"] for rule in group["rules"]]
    sloth_slos = {slo["name"]: slo for slo in forms["sloth"]["slos"]}
    pyrra_slos = {r["metadata"]["name"].removeprefix("actionscheduler-"): r for r in forms["pyrra"]}
    openslo_slos = {
        d["metadata"]["name"].removeprefix("actionscheduler-"): d
        for d in forms["openslo"]
        if d["kind"] == "SLO"
    }
    expected = {
        queries.slo_name(scope, name): (scope, name)
        for scope in objectives.scopes
        for name in queries.SLIS
    }
    assert set(sloth_slos) == set(pyrra_slos) == set(openslo_slos) == set(expected)
    for slug, (scope, name) in expected.items():
        percent = queries.objective_of(scope, name)
        sli = queries.sli(objectives, scope, name)
        objective = next(
            r
            for r in records
            if r.get("record") == prometheus_rules.OBJECTIVE and r["labels"]["slo"] == slug
        )
        assert objective["expr"].endswith(f"+ {percent / 100:g}")
        assert sloth_slos[slug]["objective"] == percent
        assert float(pyrra_slos[slug]["spec"]["target"]) == percent
        assert openslo_slos[slug]["spec"]["objectives"][0]["target"] == pytest.approx(percent / 100)
        # the window
        assert any(
            r.get("record") == f"{prometheus_rules.ERRORS}{objectives.window}"
            and r["labels"]["slo"] == slug
            for r in records
        )
        assert pyrra_slos[slug]["spec"]["window"] == objectives.window
        assert openslo_slos[slug]["spec"]["timeWindow"][0]["duration"] == objectives.window
        assert f"--default-slo-period={objectives.window}" in sloth.header(objectives)
        # the same series: Sloth's queries are the rules' with its window variable; Pyrra's
        # and OpenSLO's selectors are the ones inside the rules' queries
        five = next(
            r
            for r in records
            if r.get("record") == f"{prometheus_rules.ERRORS}5m" and r["labels"]["slo"] == slug
        )
        events = sloth_slos[slug]["sli"]["events"]
        assert five["expr"] == f"{events['error_query']}\n/\n{events['total_query']}".replace(
            "{{.window}}", "5m"
        )
        indicator = pyrra_slos[slug]["spec"]["indicator"]
        ratio = openslo_slos[slug]["spec"]["indicator"]["spec"]["ratioMetric"]
        if name == queries.START_ON_TIME:
            assert indicator["latency"]["success"]["metric"] == sli.good_selector
            assert indicator["latency"]["total"]["metric"] == sli.total_counter
            assert sli.good_selector in ratio["good"]["metricSource"]["spec"]["query"]
        else:
            assert indicator["ratio"]["errors"]["metric"] == sli.error_selector
            assert indicator["ratio"]["total"]["metric"] == sli.total_counter
            assert sli.error_selector in ratio["bad"]["metricSource"]["spec"]["query"]
        assert sli.total_counter in ratio["total"]["metricSource"]["spec"]["query"]
        for selector in (sli.good_selector, sli.error_selector, sli.total_counter):
            assert not selector or selector in five["expr"]
        # the alerts: one name per SLI, page critical, ticket warning, everywhere
        alert_name = queries.ALERT_NAMES[name]
        assert {
            a["labels"]["severity"]
            for a in alerts_of(forms["rules"])
            if a["labels"]["slo"] == slug and a["alert"] == alert_name
        } == {"critical", "warning"}
        assert sloth_slos[slug]["alerting"]["name"] == alert_name
        assert sloth_slos[slug]["alerting"]["page_alert"]["labels"]["severity"] == "critical"
        assert sloth_slos[slug]["alerting"]["ticket_alert"]["labels"]["severity"] == "warning"
        assert pyrra_slos[slug]["spec"]["alerting"]["name"] == alert_name
        assert pyrra_slos[slug]["spec"]["alerting"]["severities"] == {
            "fastBurn": "critical",
            "mediumBurn": "critical",
            "slowBurn": "warning",
            "longTermBurn": "warning",
        }


def test_the_shipped_objectives_document_is_the_charts_default() -> None:
    values = yaml.safe_load(
        (ROOT / "helm" / "actionscheduler-exporter" / "values.yaml").read_text()
    )
    assert values["slo"]["objectives"] == yaml.safe_load(SOURCE.read_text())


@pytest.mark.parametrize(
    ("section", "name", "problem"),
    [
        ("sites", "shop\nmain", "must not hold control characters"),
        ("groups", "mail\t", "must not hold control characters"),
        ("sites", "shop-$window", "must not hold '$window'"),
        ("groups", "{{.window}}", "must not hold '{{'"),
    ],
)
def test_names_no_rule_can_hold_are_refused_naming_the_problem(
    section: str, name: str, problem: str
) -> None:
    document = {**objectives_with(), section: {name: {}}}
    with pytest.raises(ObjectivesError) as raised:
        parse(document)
    assert raised.value.key == f"{section}[{json.dumps(name)}]"
    assert raised.value.problem.startswith(problem)


def test_names_with_backslashes_and_quotes_are_escaped_in_matchers_and_regexes() -> None:
    objectives = parse({**objectives_with(), "sites": {"shop\\": {}, 'a"b\\c': {}}})
    matcher = queries.selection(objectives, objectives.scopes[0]).matchers[0]
    # regex escapes \\ and the literal's escapes of each backslash and quote
    assert matcher == 'site!~"a\\"b\\\\\\\\c|shop\\\\\\\\"'
    named = queries.selection(objectives, objectives.scopes[2]).matchers[0]
    assert named == 'site="shop\\\\"'


def test_resource_names_are_unique_when_safe_spellings_meet() -> None:
    names = ["shop-a", "shop.a", "Shop-A", "shop_a", "日本"]
    objectives = parse({**objectives_with(), "sites": {name: {} for name in names}})
    slugs = [queries.slo_name(scope, "success") for scope in objectives.scopes[1:]]
    assert len(set(slugs)) == len(names), slugs
    assert "success-site-shop-a" in slugs  # a name that is its own safe spelling keeps it
    for form in (pyrra.resources(objectives), openslo.documents(objectives)):
        resources = [item["metadata"]["name"] for item in form]
        assert len(set(resources)) == len(resources), resources
    for slug in slugs:
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", slug), slug
