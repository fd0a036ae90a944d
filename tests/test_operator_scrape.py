"""The exporter scraped by a real Prometheus configured as the Prometheus Operator
configures it for the chart's rendered ServiceMonitor or PodMonitor (issue 16): the
operator's target labels (namespace, service, pod, container, endpoint, job) sit beside
the exporter's own, with honorLabels false and true, the rules join the workers' series
as they should, and the KEDA query finds its release's exporter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.config.model import WorkersConfig
from testbed.store import ActionSchedulerStore
from tests.support.fake_kubernetes import FakeKubernetes, kubernetes_config
from tests.support.helm_chart import ALL_ON, find, merged, render
from tests.support.http_server import RunningExporter
from tests.support.operator_scrape import pod_monitor_scrape_configs, service_monitor_scrape_configs
from tests.support.prometheus import Prometheus
from tests.support.series import RULES

EXPORTER_POD = "shop-actionscheduler-exporter-6f7d9c8b5-q7x2k"
# The workers run in another namespace than the exporter's release ("shop").
WORKERS = WorkersConfig("shop-workers", "shop-worker")


@pytest.mark.parametrize("honor_labels", [False, True])
def test_series_and_rules_under_the_operators_relabeling(
    honor_labels: bool,
    store: ActionSchedulerStore,
    api: FakeKubernetes,
    site: Callable[..., SiteConfig],
    exporter_http: Callable[..., RunningExporter],
) -> None:
    objects = render(merged(ALL_ON, **{"serviceMonitor.honorLabels": honor_labels}))
    monitor, service = find(objects, "ServiceMonitor"), find(objects, "Service", "exporter")
    store.create("woocommerce_deliver_webhook_async")
    running = exporter_http(site(workers=(WORKERS,), kubernetes=kubernetes_config(api)))
    configs = service_monitor_scrape_configs(
        monitor, service, f"127.0.0.1:{running.port}", EXPORTER_POD, "exporter"
    )
    assert configs[0]["honor_labels"] is honor_labels
    prometheus = Prometheus([], rule_files=RULES, scrape_configs=configs)
    try:
        restarts = prometheus.wait_for("actionscheduler_worker_container_restarts_total")
        every = prometheus.wait_for('{__name__=~"actionscheduler_.+"}')
        workload = prometheus.wait_for("site_workload:actionscheduler_worker_info:max")
        branch = prometheus.wait_for(
            "sum without (worker_pod) (actionscheduler_worker_container_restarts_total)"
        )
    finally:
        prometheus.stop()

    # No label of the exporter's was pushed aside by the operator's target labels.
    clashes = {name for s in every for name in s["metric"] if name.startswith("exported_")}
    assert not clashes
    service_name = service["metadata"]["name"]
    for series in restarts:
        labels: dict[str, Any] = series["metric"]
        assert labels["pod"] == EXPORTER_POD  # the target's pod: the exporter
        assert labels["worker_pod"].startswith("shop-worker-")  # the worker's pod
        assert (labels["namespace"], labels["service"], labels["job"]) == (
            "shop",
            service_name,
            service_name,
        )
        assert (labels["container"], labels["endpoint"]) == ("exporter", "metrics")
    assert len(restarts) == 3
    # The kube-state-metrics join sees the workers' namespace, not the exporter's.
    (joined,) = workload
    assert joined["metric"]["namespace"] == "shop-workers"
    assert joined["metric"]["container"] == "worker"
    # The exporter-source branch of ActionSchedulerWorkerRestarts adds pods up per site.
    (per_site,) = branch
    assert per_site["metric"]["site"] == "shop" and float(per_site["value"][1]) == 9


@pytest.mark.parametrize("monitor_namespace", [None, "monitoring"])
def test_a_podmonitor_target_and_the_keda_query_that_selects_it(
    monitor_namespace: str | None,
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
    exporter_http: Callable[..., RunningExporter],
) -> None:
    """The chart's PodMonitor (in the release's namespace, or moved to the monitoring one),
    scraped as the operator configures it: its target labels beside the exporter's, and
    the rendered ScaledObject's query finds the release's due backlog by the job the
    operator gives the target (`<monitor namespace>/<monitor name>`)."""
    values = merged(ALL_ON, **{"serviceMonitor.enabled": False, "podMonitor.enabled": True})
    if monitor_namespace:
        values = merged(values, **{"podMonitor.namespace": monitor_namespace})
    objects = render(values)
    monitor = find(objects, "PodMonitor")
    pod_template = find(objects, "Deployment", "exporter")["spec"]["template"]
    (trigger,) = find(objects, "ScaledObject")["spec"]["triggers"]
    for index in range(3):
        store.create("woocommerce_deliver_webhook_async", args=[index])
    running = exporter_http(site())
    configs = pod_monitor_scrape_configs(
        monitor, pod_template, "shop", f"127.0.0.1:{running.port}", EXPORTER_POD
    )
    prometheus = Prometheus([], rule_files=RULES, scrape_configs=configs)
    try:
        every = prometheus.wait_for('{__name__=~"actionscheduler_.+"}')
        backlog = prometheus.wait_for(trigger["metadata"]["query"])
    finally:
        prometheus.stop()
    assert not {name for s in every for name in s["metric"] if name.startswith("exported_")}
    (up,) = [s for s in every if s["metric"]["__name__"] == "actionscheduler_up"]
    job = f"{monitor['metadata']['namespace']}/{monitor['metadata']['name']}"
    assert {key: up["metric"][key] for key in ("namespace", "pod", "container", "job")} == {
        "namespace": "shop",
        "pod": EXPORTER_POD,
        "container": "exporter",
        "job": job,
    }
    assert up["metric"]["endpoint"] == "metrics"
    (signal,) = backlog
    assert float(signal["value"][1]) == 3  # the three due actions
