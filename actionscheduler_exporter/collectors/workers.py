"""The site's worker pods, Deployment and autoscaler, read from the Kubernetes API.

At most one set of calls (list pods, get Deployment, get HPA) per `cache` seconds, each
bounded by `timeout`. The round reads this source in the background (its freshness), so
a scrape waits for it only as long as its own deadline allows and otherwise reports the
previous reading: a slow or failing API never delays or fails the database metrics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actionscheduler_exporter.config.model import KubernetesConfig, SiteConfig
from actionscheduler_exporter.kubernetes.client import (
    Credentials,
    KubernetesClient,
    KubernetesError,
    from_kubeconfig,
    in_cluster,
)
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.source import Freshness, Source


class KubernetesWorkers(Source[None]):
    """One reading: list the worker pods, get the Deployment and the HPA (when set)."""

    name = "kubernetes"
    metrics = (
        catalog.WORKER_RESTARTS,
        catalog.WORKER_LAST_TERMINATION,
        catalog.WORKER_PODS,
        catalog.WORKER_DEPLOYMENT_REPLICAS,
        catalog.WORKER_AUTOSCALER_REPLICAS,
    )
    error_metric = catalog.KUBERNETES_ERRORS
    error_kinds = catalog.KUBERNETES_ERROR_KINDS
    up_metric = catalog.KUBERNETES_UP

    def __init__(
        self,
        config: KubernetesConfig,
        credentials: Callable[[], Credentials] | None = None,
    ) -> None:
        self.config = config
        self._credentials = credentials or self._default_credentials
        self._client: KubernetesClient | None = None

    def freshness(self, site: SiteConfig) -> Freshness:
        """At most one set of calls per `cache` seconds; a scrape waits for each due one
        (within its deadline), so a pod's restart shows in the next scrape."""
        return Freshness(interval=self.config.cache, wait_each=True)

    def read(self, context: None = None) -> list[Sample]:
        client = self._connect()
        try:
            found = self._pod_samples(client)
            if self.config.deployment:
                found += self._deployment_samples(client)
            if self.config.horizontalpodautoscaler:
                found += self._autoscaler_samples(client)
        except (AttributeError, TypeError, ValueError) as error:
            # `metadata: null`, `restartCount: "lots"`: an answer not of the API's shape
            # fails the reading (counted, the last good one served), not the thread.
            raise KubernetesError(
                "http", f"the API answered with a document of another shape ({error})"
            ) from None
        return found

    def _connect(self) -> KubernetesClient:
        if self._client is None:
            self._client = KubernetesClient(self._credentials(), self.config.timeout)
        return self._client

    def _default_credentials(self) -> Credentials:
        if self.config.kubeconfig:
            # `~/.kube/config`, as the README and kubectl write it.
            return from_kubeconfig(Path(self.config.kubeconfig).expanduser())
        return in_cluster()

    def _pod_samples(self, client: KubernetesClient) -> list[Sample]:
        namespace = self.config.namespace
        pods = client.get(
            f"/api/v1/namespaces/{namespace}/pods",
            "pods",
            "list",
            labelSelector=self.config.selector,
        )
        found: list[Sample] = []
        ready: Counter[str] = Counter({"true": 0, "false": 0})
        for pod in pods.get("items") or []:
            name = str(pod.get("metadata", {}).get("name", ""))
            status = pod.get("status") or {}
            ready["true" if _is_ready(status) else "false"] += 1
            container = _container_status(status, self.config.container)
            if container is None:
                continue
            found.append(
                sample(catalog.WORKER_RESTARTS, container.get("restartCount", 0), worker_pod=name)
            )
            terminated = (container.get("lastState") or {}).get("terminated") or {}
            if terminated.get("reason"):
                found.append(
                    sample(
                        catalog.WORKER_LAST_TERMINATION,
                        1,
                        worker_pod=name,
                        reason=str(terminated["reason"]),
                    )
                )
        found += [
            sample(catalog.WORKER_PODS, count, ready=state)
            for state, count in sorted(ready.items())
        ]
        return found

    def _deployment_samples(self, client: KubernetesClient) -> list[Sample]:
        deployment = client.get(
            f"/apis/apps/v1/namespaces/{self.config.namespace}/deployments/"
            f"{self.config.deployment}",
            "deployments",
            "get",
        )
        return _replicas(
            catalog.WORKER_DEPLOYMENT_REPLICAS,
            deployment,
            {"desired": ("spec", "replicas"), "updated": ("status", "updatedReplicas"),
             "available": ("status", "availableReplicas")},
        )  # fmt: skip

    def _autoscaler_samples(self, client: KubernetesClient) -> list[Sample]:
        hpa = client.get(
            f"/apis/autoscaling/v2/namespaces/{self.config.namespace}/"
            f"horizontalpodautoscalers/{self.config.horizontalpodautoscaler}",
            "horizontalpodautoscalers",
            "get",
        )
        return _replicas(
            catalog.WORKER_AUTOSCALER_REPLICAS,
            hpa,
            {"current": ("status", "currentReplicas"), "desired": ("status", "desiredReplicas"),
             "maximum": ("spec", "maxReplicas")},
        )  # fmt: skip


def _replicas(
    metric: MetricDef, resource: dict[str, Any], fields: dict[str, tuple[str, str]]
) -> list[Sample]:
    """One sample per state, read from the resource's spec or status (0 when absent)."""
    return [
        sample(metric, (resource.get(part) or {}).get(field, 0), state=state)
        for state, (part, field) in fields.items()
    ]


def _is_ready(status: dict[str, Any]) -> bool:
    return any(
        condition.get("type") == "Ready" and condition.get("status") == "True"
        for condition in status.get("conditions") or []
    )


def _container_status(status: dict[str, Any], name: str) -> dict[str, Any] | None:
    for container in status.get("containerStatuses") or []:
        if container.get("name") == name:
            return dict(container)
    return None
