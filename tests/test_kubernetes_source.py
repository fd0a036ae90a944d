"""The Kubernetes source against a local HTTPS API server (tests/support/fake_kubernetes.py), next
to a real MariaDB: worker restarts, termination reasons, readiness, Deployment and HPA
replicas, and every failure kept away from the database metrics."""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from actionscheduler_exporter.collectors.workers import KubernetesWorkers
from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.config.model import KubernetesConfig
from actionscheduler_exporter.kubernetes.client import Credentials, KubernetesError, in_cluster
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.support.fake_kubernetes import FakeKubernetes, kubernetes_config, pod
from tests.support.helm_chart import ALL_ON, find, render
from tests.support.waiting import wait_until


def by_labels(result: SiteResult, metric: catalog.MetricDef) -> dict[tuple[str, ...], float]:
    return {
        tuple(value for _, value in s.labels): s.value for s in result.samples if s.metric is metric
    }


def test_workers_restarts_reasons_readiness_and_replicas(
    api: FakeKubernetes,
    store: ActionSchedulerStore,
    scrape: Scrape,
    site: Callable[..., SiteConfig],
) -> None:
    (result,) = scrape(site(kubernetes=kubernetes_config(api)))
    assert result.up
    assert result.value("actionscheduler_kubernetes_up") == 1
    assert by_labels(result, catalog.WORKER_RESTARTS) == {
        ("shop-worker-5d9f7c6b8-aaaaa",): 0,
        ("shop-worker-5d9f7c6b8-bbbbb",): 2,
        ("shop-worker-5d9f7c6b8-ccccc",): 7,
    }
    assert by_labels(result, catalog.WORKER_LAST_TERMINATION) == {
        ("shop-worker-5d9f7c6b8-bbbbb", "OOMKilled"): 1,
        ("shop-worker-5d9f7c6b8-ccccc", "Error"): 1,
    }
    assert by_labels(result, catalog.WORKER_PODS) == {("false",): 1, ("true",): 2}
    assert by_labels(result, catalog.WORKER_DEPLOYMENT_REPLICAS) == {
        ("desired",): 3,
        ("updated",): 2,
        ("available",): 2,
    }
    assert by_labels(result, catalog.WORKER_AUTOSCALER_REPLICAS) == {
        ("current",): 3,
        ("desired",): 4,
        ("maximum",): 4,
    }
    (call,) = [c for c in api.calls if c.resource == "pods"]
    assert call.query == {"labelSelector": ["app.kubernetes.io/component=worker"]}


def test_pods_that_are_gone_disappear(api: FakeKubernetes, site: Callable[..., SiteConfig]) -> None:
    source = KubernetesWorkers(kubernetes_config(api))
    first = {
        dict(s.labels)["worker_pod"] for s in source.read() if s.metric is catalog.WORKER_RESTARTS
    }
    api.pods = [pod("shop-worker-7f8e9d0c1-ddddd", restarts=1)]
    second = {
        dict(s.labels)["worker_pod"] for s in source.read() if s.metric is catalog.WORKER_RESTARTS
    }
    assert len(first) == 3
    assert second == {"shop-worker-7f8e9d0c1-ddddd"}


def test_readings_are_cached(
    api: FakeKubernetes, store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    coordinator = Coordinator(
        ExporterConfig(sites=(site(kubernetes=kubernetes_config(api, cache=60.0)),))
    )
    try:
        for _ in range(5):
            coordinator.scrape()
    finally:
        coordinator.close()
    assert [c.resource for c in api.calls] == ["pods", "deployments", "horizontalpodautoscalers"]


def test_forbidden_names_the_missing_verb_and_resource_and_spares_the_database(
    api: FakeKubernetes,
    store: ActionSchedulerStore,
    scrape: Scrape,
    site: Callable[..., SiteConfig],
    caplog: pytest.LogCaptureFixture,
) -> None:
    api.forbidden = {"pods"}
    store.create("woocommerce_deliver_webhook_async")
    (result,) = scrape(site(kubernetes=kubernetes_config(api)))
    assert result.up
    assert result.value("actionscheduler_due_actions", claim="unclaimed") == 1
    assert result.value("actionscheduler_kubernetes_up") == 0
    assert by_labels(result, catalog.KUBERNETES_ERRORS)[("forbidden",)] == 1
    assert result.value(catalog.COLLECTOR_SUCCESS.name, collector="kubernetes") == 0
    assert not [s for s in result.samples if s.metric is catalog.WORKER_RESTARTS]
    assert "needs RBAC verb list on pods" in caplog.text
    assert "cannot list resource" in caplog.text


def test_a_rotated_token_is_read_again_after_401(api: FakeKubernetes, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("token-1")
    context = ssl.create_default_context(cafile=str(api.ca))

    def credentials() -> Credentials:
        return Credentials(api.server, context, token_file=token_file)

    source = KubernetesWorkers(kubernetes_config(api), credentials=credentials)
    assert source.read()
    # The API server rotates to a new token; the file is rewritten with the same mtime, so
    # only the 401 tells the exporter to read it again.
    mtime = token_file.stat().st_mtime_ns
    api.token = "token-2"
    token_file.write_text("token-2")
    os.utime(token_file, ns=(mtime, mtime))
    assert source.read()
    # A token that stays wrong is reported, not retried forever.
    api.token = "token-3"
    with pytest.raises(KubernetesError, match="rejected the exporter's credentials"):
        source.read()


def test_a_slow_api_is_waited_for_and_a_timeout_is_an_error(
    api: FakeKubernetes,
    store: ActionSchedulerStore,
    scrape: Scrape,
    site: Callable[..., SiteConfig],
) -> None:
    api.delay = 0.3
    slow = KubernetesWorkers(kubernetes_config(api, timeout=2.0))
    assert slow.read()

    api.delay = 3.0
    started = time.monotonic()
    (result,) = scrape(site(kubernetes=kubernetes_config(api, timeout=0.5)))
    assert time.monotonic() - started < 2.5
    assert result.up
    assert result.value("actionscheduler_kubernetes_up") == 0
    assert by_labels(result, catalog.KUBERNETES_ERRORS)[("timeout",)] == 1


def test_in_cluster_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: FakeKubernetes
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("token-1\n")
    (account / "ca.crt").write_bytes(api.ca.read_bytes())
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(api.port))
    credentials = in_cluster(account)
    assert credentials.bearer() == "token-1"
    source = KubernetesWorkers(kubernetes_config(api), credentials=lambda: credentials)
    assert source.read()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(KubernetesError, match="not running in a cluster"):
        in_cluster(account)


def test_the_charts_role_allows_exactly_the_calls_the_source_makes(api: FakeKubernetes) -> None:
    objects = render(ALL_ON)
    config_map = find(objects, "ConfigMap", "exporter")
    exporter_config = yaml.safe_load(config_map["data"]["exporter.yml"])
    shop = next(s for s in exporter_config["sites"] if s["name"] == "shop")
    settings = shop["kubernetes"]
    source = KubernetesWorkers(
        KubernetesConfig(
            namespace="shop",
            selector=settings["selector"],
            container=settings["container"],
            deployment=settings["deployment"],
            horizontalpodautoscaler=settings["horizontalpodautoscaler"],
            kubeconfig=str(api.kubeconfig()),
        )
    )
    api.deployment["metadata"]["name"] = settings["deployment"]
    source.read()
    made = {(c.api_group, c.resource, c.verb, c.name) for c in api.calls}

    role = find(objects, "Role")
    allowed = {
        (group, resource, verb, name)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", [""])
    }
    assert allowed == made
    binding = find(objects, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    deployment = find(objects, "Deployment", "exporter")["spec"]["template"]["spec"]
    assert deployment["automountServiceAccountToken"] is True
    assert binding["subjects"][0]["name"] == deployment["serviceAccountName"]


def test_a_slow_api_never_holds_up_the_scrape(
    api: FakeKubernetes,
    store: ActionSchedulerStore,
    scrape: Scrape,
    site: Callable[..., SiteConfig],
) -> None:
    """Three slow calls take longer than the whole scrape may: the database metrics come
    back in time, and the reading lands in a later scrape."""
    store.create("woocommerce_deliver_webhook_async")
    api.delay = 1.0
    coordinator = Coordinator(
        ExporterConfig(sites=(site(kubernetes=kubernetes_config(api, timeout=5.0, cache=60.0)),))
    )
    try:
        started = time.monotonic()
        (first,) = coordinator.scrape(1.5)
        assert time.monotonic() - started < 2.5
        assert first.up
        assert first.value("actionscheduler_due_actions", claim="unclaimed") == 1
        assert first.value("actionscheduler_kubernetes_up") == 0  # no reading yet
        # The reading lands in a later scrape, without another set of calls.
        assert wait_until(
            lambda: coordinator.scrape(1.5)[0].value("actionscheduler_kubernetes_up") == 1, 20
        )
        (later,) = coordinator.scrape(1.5)
        assert by_labels(later, catalog.WORKER_PODS) == {("false",): 1, ("true",): 2}
    finally:
        coordinator.close()


def test_an_api_that_never_answers_leaves_every_sites_database_metrics_intact(
    api: FakeKubernetes,
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
) -> None:
    """Twelve sites whose Kubernetes API accepts connections and never answers in time,
    the database healthy: the API is waited for off the database server's threads, so
    every site is up with its backlog at every scrape, and the scrape answers in time."""
    store.create("woocommerce_deliver_webhook_async")
    api.delay = 30.0
    config = kubernetes_config(api, timeout=5.0)
    sites = tuple(site(name=f"shop{index}", kubernetes=config) for index in range(12))
    coordinator = Coordinator(ExporterConfig(sites=sites))
    try:
        for _ in range(2):
            started = time.monotonic()
            results = coordinator.scrape(10.0)
            assert time.monotonic() - started < 10.0  # Prometheus' timeout
            assert len(results) == 12
            for result in results:
                assert result.up, result.problems
                assert result.value("actionscheduler_due_actions", claim="unclaimed") == 1
                assert result.value("actionscheduler_kubernetes_up") == 0
    finally:
        coordinator.close()


@pytest.mark.parametrize(
    "damage",
    [
        lambda pod: pod.update(metadata=None),
        lambda pod: pod["status"]["containerStatuses"][0].update(restartCount="lots"),
        lambda pod: pod.update(status=["not", "a", "mapping"]),
    ],
)
def test_an_answer_of_another_shape_is_a_counted_error_not_a_dead_thread(
    api: FakeKubernetes, damage: Callable[[dict[str, Any]], None]
) -> None:
    """Issue 25, item 8: `metadata: null` or `restartCount: "lots"` raised in the
    background thread without counting in kubernetes_errors_total."""
    source = KubernetesWorkers(kubernetes_config(api))
    assert source.read()
    damage(api.pods[1])
    with pytest.raises(KubernetesError) as raised:
        source.read()
    assert raised.value.kind == "http" and "another shape" in raised.value.message
