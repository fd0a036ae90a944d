"""Rules scoped per release (`prometheusRule.scope: release`): every store's release installs
its own copy, which reads its own exporter only, so two stores whose sites share a name
(`wordpress`, the database's name) are neither merged nor alerted twice. Checked by promtool
on the rule files the chart renders, and the whole shipped suite on the scoped rules."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from rules.scope import (
    CHART_COPY,
    EXPORTER_LABEL,
    EXPORTER_PLACEHOLDER,
    PLACEHOLDER,
    render,
    scope_expression,
)
from tests.support.helm_chart import ALL_ON, find, merged, notes
from tests.support.helm_chart import render as render_chart
from tests.support.prometheus import RULE_TESTS, promtool_run

ROOT = Path(__file__).resolve().parent.parent
NAMESPACES = ("shop-a", "shop-b")
RELEASE = "store"  # the same release name in both namespaces
SERVICE = f"{RELEASE}-actionscheduler-exporter"
ONE_SITE = {
    "config": {"sites": [{"name": "wordpress", "database": "wordpress"}]},
    "keda.site": "wordpress",
    "worker.site": "wordpress",
}


def scoped_values(**changes: Any) -> dict[str, Any]:
    return merged(ALL_ON, **ONE_SITE, **{"prometheusRule.scope": "release"}, **changes)


def rule_file(objects: list[dict[str, Any]], path: Path) -> Path:
    """The PrometheusRule's groups as the operator writes them into a rule file."""
    path.write_text(yaml.safe_dump({"groups": find(objects, "PrometheusRule")["spec"]["groups"]}))
    return path


def two_releases(folder: Path) -> list[str]:
    """The rule files of release `store` in each namespace, scope release."""
    return [
        str(rule_file(render_chart(scoped_values(), ns, RELEASE), folder / f"{ns}.yml"))
        for ns in NAMESPACES
    ]


def target(namespace: str, address: str) -> str:
    """The labels the operator gives the chart's ServiceMonitor target in a namespace."""
    return (
        f'job="{SERVICE}",namespace="{namespace}",service="{SERVICE}",endpoint="http",'
        f'instance="{address}:9966",pod="{SERVICE}-6f7d9c8b5-abcde",container="exporter"'
    )


def labels_of(namespace: str, address: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', target(namespace, address)))


def series_text(alertname: str, labels: dict[str, str]) -> str:
    """An ALERTS sample as promtool expects it."""
    every = {"alertname": alertname, "alertstate": "firing", **labels}
    return "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in sorted(every.items())) + "}"


def assert_alerts(
    rule_files: list[str],
    series: list[tuple[str, str]],
    at: str,
    expected: dict[str, list[dict[str, str]]],
) -> None:
    """promtool: exactly the expected alerts fire at `at`, with exactly these labels."""
    case = {
        "rule_files": rule_files,
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "promql_expr_test": [
                    {
                        "eval_time": at,
                        "expr": f'ALERTS{{alertname="{name}",alertstate="firing"}}',
                        "exp_samples": [
                            {"labels": series_text(name, labels), "value": 1} for labels in alerts
                        ],
                    }
                    for name, alerts in expected.items()
                ],
            }
        ],
    }
    path = Path(rule_files[0]).with_name("alerts.test.yml")
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    tested = promtool_run("test", "rules", str(path))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_chart_copy_of_the_scoped_rules_is_current() -> None:
    assert CHART_COPY.read_text() == render(), "run make chart-files"


def test_the_placeholder_goes_into_every_selector_of_ours_and_nowhere_else() -> None:
    assert scope_expression('sum without (claim) (actionscheduler_due_actions{claim="x"})') == (
        f'sum without (claim) (actionscheduler_due_actions{{{PLACEHOLDER},claim="x"}})'
    )
    assert scope_expression("rate(actionscheduler_actions_completed_total[5m])") == (
        f"rate(actionscheduler_actions_completed_total{{{PLACEHOLDER}}}[5m])"
    )
    assert scope_expression("up == 0 and on (job) absent(actionscheduler_up{})") == (
        f"up{{{PLACEHOLDER}}} == 0 and on (job) absent(actionscheduler_up{{{PLACEHOLDER}}})"
    )
    # KSM and KEDA series, label names and strings stay as they are.
    kept = 'label_replace(kube_pod_info, "up", "$1", "pod", "(.+)") * on (up) group_left () x'
    assert scope_expression(kept) == kept
    assert scope_expression("max by (site) (site_workload:actionscheduler_worker_info:max)") == (
        "max by (site) (site_workload:actionscheduler_worker_info:max"
        f'{{{EXPORTER_LABEL}="{EXPORTER_PLACEHOLDER}"}})'
    )


def test_the_shipped_suite_passes_on_the_scoped_rules(tmp_path: Path) -> None:
    """The scoped rules mean what the shipped ones mean: every promtool case of rules/tests
    passes on them, scoped to every job and without the exporter label."""
    scoped = yaml.safe_load(
        render()
        .replace(PLACEHOLDER, 'job=~".+"')
        .replace(f'{EXPORTER_LABEL}="{EXPORTER_PLACEHOLDER}"', f'{EXPORTER_LABEL}=""')
    )
    for group in scoped["groups"]:
        for rule in group["rules"]:
            rule.get("labels", {}).pop(EXPORTER_LABEL, None)
            if rule.get("labels") == {}:
                del rule["labels"]
    (tmp_path / "actionscheduler.rules.yml").write_text(yaml.safe_dump(scoped))
    for test in RULE_TESTS:
        case = yaml.safe_load(test.read_text())
        if case["rule_files"] != ["../actionscheduler.rules.yml"]:
            continue  # the SLO rules' tests (slo.test.yml): not scoped per release
        case["rule_files"] = [str(tmp_path / "actionscheduler.rules.yml")]
        copied = tmp_path / test.name
        copied.write_text(yaml.safe_dump(case, sort_keys=False))
        tested = promtool_run("test", "rules", str(copied))
        assert tested.returncode == 0, tested.stdout + tested.stderr


def test_two_stores_named_wordpress_alert_once_each(tmp_path: Path) -> None:
    rule_files = two_releases(tmp_path)
    a, b = (
        target(ns, address)
        for ns, address in zip(NAMESPACES, ("10.0.0.1", "10.0.0.2"), strict=True)
    )
    series = [
        # store A's site is down; store B's is up (both are "wordpress")
        (f'actionscheduler_up{{{a},site="wordpress"}}', "0x20"),
        (f'actionscheduler_up{{{b},site="wordpress"}}', "1x20"),
        (f"actionscheduler_exporter_build_info{{{a}}}", "1x20"),
        (f"actionscheduler_exporter_build_info{{{b}}}", "1x20"),
        (f"up{{{a}}}", "1x20"),
        (f"up{{{b}}}", "1x20"),
        # store B: two runners for a limit of one (refused); store A: one runner, its limit
        (f'actionscheduler_active_claims{{{a},site="wordpress"}}', "1x20"),
        (f'actionscheduler_active_claims{{{b},site="wordpress"}}', "1x20"),
        (f'actionscheduler_concurrent_batches_limit{{{a},site="wordpress"}}', "1x20"),
        (f'actionscheduler_concurrent_batches_limit{{{b},site="wordpress"}}', "1x20"),
        (f'actionscheduler_due_actions{{{a},site="wordpress",claim="unclaimed"}}', "500-10x20"),
        (f'actionscheduler_due_actions{{{b},site="wordpress",claim="unclaimed"}}', "500-10x20"),
        (
            f'actionscheduler_actions_started_total{{{a},site="wordpress",hook="h",group="g"}}',
            "0+10x20",
        ),
        (
            f'actionscheduler_actions_started_total{{{b},site="wordpress",hook="h",group="g"}}',
            "0+10x20",
        ),
        (f'actionscheduler_worker_pods{{{a},site="wordpress",ready="true"}}', "1x20"),
        (f'actionscheduler_worker_pods{{{b},site="wordpress",ready="true"}}', "2x20"),
        # both stores' workers are Deployments "store-worker", in their own namespaces;
        # only store A's restart (kube-state-metrics, joined through worker_info)
        (
            f'actionscheduler_worker_info{{{a},site="wordpress",worker_namespace="shop-a",'
            'deployment="store-worker",worker_container="worker"}',
            "1x20",
        ),
        (
            f'actionscheduler_worker_info{{{b},site="wordpress",worker_namespace="shop-b",'
            'deployment="store-worker",worker_container="worker"}',
            "1x20",
        ),
        (f'actionscheduler_alert_threshold_restarts{{{a},site="wordpress"}}', "3x20"),
        (f'actionscheduler_alert_threshold_restarts{{{b},site="wordpress"}}', "3x20"),
        (
            'kube_pod_container_status_restarts_total{job="kube-state-metrics",'
            'namespace="shop-a",pod="store-worker-5d9f7c6b8-abcde",container="worker"}',
            "0+1x20",
        ),
        (
            'kube_pod_container_status_restarts_total{job="kube-state-metrics",'
            'namespace="shop-b",pod="store-worker-5d9f7c6b8-fghij",container="worker"}',
            "0x20",
        ),
    ]
    exporter_a = f"shop-a/{SERVICE}"
    exporter_b = f"shop-b/{SERVICE}"
    expected = {
        "ActionSchedulerSiteDown": [
            {**labels_of("shop-a", "10.0.0.1"), "site": "wordpress", "severity": "critical",
             "exporter": exporter_a},
        ],
        "ActionSchedulerConcurrentBatchesAtLimit": [
            {**labels_of("shop-b", "10.0.0.2"), "site": "wordpress", "severity": "warning",
             "exporter": exporter_b},
        ],
        "ActionSchedulerWorkerRestarts": [
            {"namespace": "shop-a", "deployment": "store-worker", "container": "worker",
             "site": "wordpress", "severity": "warning", "exporter": exporter_a},
        ],
        "ActionSchedulerMetricsAbsent": [],
    }  # fmt: skip
    assert_alerts(rule_files, series, "15m", expected)


def test_a_store_whose_exporter_vanishes_is_reported_by_its_own_rules(tmp_path: Path) -> None:
    a = target("shop-a", "10.0.0.1")
    expected = {
        "ActionSchedulerMetricsAbsent": [
            {"namespace": "shop-b", "service": SERVICE, "severity": "warning",
             "exporter": f"shop-b/{SERVICE}"},
        ],
    }  # fmt: skip
    series = [(f"actionscheduler_exporter_build_info{{{a}}}", "1x30")]
    assert_alerts(two_releases(tmp_path), series, "20m", expected)


def test_the_podmonitor_and_a_selector_of_ones_own_scope_the_rules() -> None:
    pod_monitor = render_chart(
        scoped_values(**{"serviceMonitor.enabled": False, "podMonitor.enabled": True}),
        namespace="shop-a",
        release=RELEASE,
    )
    text = yaml.safe_dump(find(pod_monitor, "PrometheusRule")["spec"])
    assert f'actionscheduler_up{{namespace="shop-a",job="shop-a/{SERVICE}"}}' in text
    own = render_chart(
        scoped_values(**{"prometheusRule.seriesSelector": 'job="shop-a-exporter"'}),
        namespace="shop-a",
        release=RELEASE,
    )
    text = yaml.safe_dump(find(own, "PrometheusRule")["spec"])
    assert 'actionscheduler_up{job="shop-a-exporter"}' in text and PLACEHOLDER not in text


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"prometheusRule.scope": "namespace"}, "prometheusRule.scope"),
        (
            {"prometheusRule.scope": "release", "serviceMonitor.enabled": False},
            "set prometheusRule.seriesSelector",
        ),
    ],
)
def test_a_scope_that_cannot_work_fails_the_render(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmError, match=message):
        render_chart(merged(ALL_ON, **ONE_SITE, **changes))


def test_promtool_checks_the_rendered_scoped_rules(tmp_path: Path) -> None:
    path = rule_file(render_chart(scoped_values(), namespace="shop-a"), tmp_path / "r.yml")
    checked = promtool_run("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_notes_say_where_the_rules_belong() -> None:
    assert "for this release's exporter only" in notes(scoped_values())
    assert "keep them in one release per cluster" in notes(ALL_ON)
