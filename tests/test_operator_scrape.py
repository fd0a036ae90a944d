"""The exporter scraped by a real Prometheus configured as the Prometheus Operator
configures it for the chart's rendered ServiceMonitor (issue 16): the operator's target
labels (namespace, service, pod, container, endpoint, job) sit beside the exporter's own,
with honorLabels false and true, and the rules join the workers' series as they should."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from exporter.config import SiteConfig
from exporter.config.model import WorkersConfig
from testbed.store import ActionSchedulerStore
from tests.fake_kubernetes import FakeKubernetes, kubernetes_config
from tests.helm_chart import ALL_ON, find, merged, render
from tests.http_server import RunningExporter
from tests.operator_scrape import service_monitor_scrape_configs
from tests.prometheus import Prometheus
from tests.series import RULES

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
    running = exporter_http(site(workers=WORKERS, kubernetes=kubernetes_config(api)))
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
