"""The chart's worker pools (issue 15): a Deployment and a ScaledObject per pool, each pool
scaled on its own backlog by a real Prometheus scraping the exporter, render-time checks,
and the exporter configuration the chart derives from the pools."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.config.loader import load_file
from actionscheduler_exporter.config.model import GroupConfig
from testbed.store import ActionSchedulerStore
from tests.support.autoscaling import scaled_object_replicas, wait_for_value
from tests.support.helm_chart import ALL_ON, find, merged, notes, render, validate
from tests.support.http_server import RunningExporter
from tests.support.operator_scrape import service_monitor_scrape_configs
from tests.support.prometheus import Prometheus

POOLS: list[dict[str, Any]] = [
    # webhooks and e-mails: everything but the slow groups
    {"name": "fast", "excludeGroups": ["reports", "imports"], "batchSize": 50,
     "keda": {"minReplicaCount": 1, "maxReplicaCount": 4}},
    # reports: few, long actions
    {"name": "reports", "group": "reports", "batchSize": 5, "longestActionSeconds": 600,
     "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
     "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1},
     "keda": {"minReplicaCount": 0, "maxReplicaCount": 2,
              "prometheus": {"threshold": 10, "activationThreshold": 0}}},
]  # fmt: skip
WITH_POOLS = merged(
    ALL_ON,
    **{"worker.pools": POOLS, "worker.concurrentBatches": 8, "keda.prometheus.threshold": 40},
)
WORKER = "shop-actionscheduler-exporter-worker"


def test_each_pool_is_a_deployment_with_its_runner_arguments_and_a_scaled_object() -> None:
    objects = render(WITH_POOLS)
    for obj in objects:
        validate(obj)
    fast = find(objects, "Deployment", "worker-fast")["spec"]
    reports = find(objects, "Deployment", "worker-reports")["spec"]
    container = fast["template"]["spec"]["containers"][0]
    assert container["args"] == ["--exclude-groups=reports,imports"]
    assert {"name": "AS_BATCH_SIZE", "value": "50"} in container["env"]
    container = reports["template"]["spec"]["containers"][0]
    assert container["args"] == ["--group=reports"]
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "512Mi"}}
    # a batch of five ten-minute actions must be able to finish after SIGTERM
    assert reports["template"]["spec"]["terminationGracePeriodSeconds"] == 5 * 600 + 30
    assert fast["selector"] != reports["selector"]
    assert find(objects, "PodDisruptionBudget", "worker-reports")
    workloads = [o for o in objects if o["kind"] in ("Deployment", "ScaledObject", "Pod")]
    assert not [o for o in workloads if o["metadata"]["name"] == WORKER]  # no default worker
    scaled = {
        o["spec"]["scaleTargetRef"]["name"]: o["spec"]
        for o in objects
        if o["kind"] == "ScaledObject"
    }
    assert set(scaled) == {f"{WORKER}-fast", f"{WORKER}-reports"}
    assert scaled[f"{WORKER}-reports"]["maxReplicaCount"] == 2
    # one TriggerAuthentication and one loop ConfigMap, shared
    assert find(objects, "TriggerAuthentication")["metadata"]["name"] == WORKER
    assert find(objects, "ConfigMap", "-worker")["metadata"]["name"] == WORKER


def test_the_exporter_keeps_the_pools_groups_and_knows_their_deployments(tmp_path: Path) -> None:
    objects = render(WITH_POOLS)
    config = find(objects, "ConfigMap", "shop-actionscheduler-exporter")["data"]["exporter.yml"]
    passwords = tmp_path / "passwords"
    passwords.mkdir()
    for name in ("shop", "network"):
        (passwords / name).write_text("pw\n")
    config = config.replace("/etc/actionscheduler-exporter/passwords", str(passwords))
    (tmp_path / "exporter.yml").write_text(config)
    shop = next(s for s in load_file(str(tmp_path / "exporter.yml")).sites if s.name == "shop")
    assert {group.slug for group in shop.groups} == {"reports", "imports"}
    assert [workers.deployment for workers in shop.workers] == [
        f"{WORKER}-fast",
        f"{WORKER}-reports",
    ]
    assert [workers.runs for workers in shop.workers] == [
        "all groups but reports, imports",
        "group reports",
    ]
    assert shop.kubernetes is not None and shop.kubernetes.deployment == ""


def test_one_pool_by_default_renders_what_it_always_rendered() -> None:
    assert render(merged(ALL_ON, **{"worker.pools": []})) == render(ALL_ON)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"worker.concurrentBatches": 6}, r"concurrentBatches \(6\) is below what the pools"),
        ({"worker.pools": [{"name": "Fast"}]}, "worker.pools.0..name"),
        ({"worker.pools": [{"name": "a"}, {"name": "a"}]}, "two pools are named"),
        (
            {"worker.pools": [{"name": "a", "group": "x", "excludeGroups": ["y"]}]},
            "not both",
        ),
        ({"worker.kind": "CronJob"}, "need worker.kind Deployment"),
        ({"keda.trigger": "mysql"}, "need keda.trigger prometheus"),
        ({"keda.scaleTargetName": "web"}, "do not go together"),
    ],
)
def test_pools_that_cannot_work_fail_the_render(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmError, match=message):
        render(merged(WITH_POOLS, **changes))


def test_each_pool_scales_on_its_own_backlog_through_prometheus(
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
    exporter_http: Callable[..., RunningExporter],
) -> None:
    objects = render(WITH_POOLS)
    scaled = {
        o["spec"]["scaleTargetRef"]["name"].removeprefix(f"{WORKER}-"): o["spec"]
        for o in objects
        if o["kind"] == "ScaledObject"
    }
    # The backlog moves faster here than the split's default interval: split every scrape.
    exporter = exporter_http(
        site(
            name="shop",
            groups=(GroupConfig("reports"), GroupConfig("imports")),
            due_split_interval=0.0,
        )
    )
    configs = service_monitor_scrape_configs(
        find(objects, "ServiceMonitor"),
        find(objects, "Service", "exporter"),
        f"127.0.0.1:{exporter.port}",
        "shop-actionscheduler-exporter-6f7d9c8b5-abcde",
        "exporter",
    )
    prometheus = Prometheus([], scrape_configs=configs)
    created = {"reports": 0, "imports": 0, "webhooks": 0}

    def add(group: str, count: int) -> None:
        for index in range(count):
            store.create(f"hook_{group}", group=group, args=[created[group] + index])
        created[group] += count

    try:
        observed = []
        # (reports, imports, webhooks) to add; the replicas each pool should get
        for reports, imports, webhooks, expected in (
            (3, 0, 20, {"fast": 1, "reports": 1}),
            (0, 50, 100, {"fast": 3, "reports": 1}),
            (40, 0, 300, {"fast": 4, "reports": 2}),
        ):
            add("reports", reports)
            add("imports", imports)
            add("webhooks", webhooks)
            backlog = {"fast": created["webhooks"], "reports": created["reports"]}
            for pool, spec in scaled.items():
                query = spec["triggers"][0]["metadata"]["query"]
                value = wait_for_value(prometheus, query, backlog[pool])
                observed.append((pool, backlog[pool], value, scaled_object_replicas(value, spec)))
                assert value == backlog[pool], observed
                assert scaled_object_replicas(value, spec) == expected[pool], observed
    finally:
        prometheus.stop()


def test_the_notes_name_the_pools() -> None:
    text = notes(WITH_POOLS)
    assert "queue worker pools for site shop: fast, reports" in text
    assert "a KEDA ScaledObject per pool" in text
