"""The site's worker pods, Deployment and autoscaler, read from the Kubernetes API.

At most one set of calls (list pods, get Deployment, get HPA) per `cache` seconds, each
bounded by `timeout`. The calls run in a thread of their own; a scrape waits for them only
as long as its own deadline allows and otherwise reports the previous reading, so a slow
or failing API never delays or fails the database metrics.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter import catalog
from exporter.collectors.base import Sample, sample
from exporter.config.model import KubernetesConfig
from exporter.kubernetes.client import (
    Credentials,
    KubernetesClient,
    KubernetesError,
    from_kubeconfig,
    in_cluster,
)

SOURCE_NAME = "kubernetes"


@dataclass
class _Reading:
    samples: list[Sample] = field(default_factory=list)
    ok: bool = False
    duration: float = 0.0
    taken_at: float = float("-inf")


class WorkerSource:
    def __init__(
        self, config: KubernetesConfig, credentials: Callable[[], Credentials] | None = None
    ) -> None:
        self.config = config
        self._credentials = credentials or self._default_credentials
        self._client: KubernetesClient | None = None
        self._reading = _Reading()
        self._errors: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._refresh: threading.Thread | None = None
        self.last_error = ""

    def samples(self, wait: float | None = None) -> list[Sample]:
        """The latest reading; a due refresh is waited for at most `wait` seconds."""
        with self._lock:
            due = time.monotonic() - self._reading.taken_at >= self.config.cache
            if due and (self._refresh is None or not self._refresh.is_alive()):
                self._refresh = threading.Thread(
                    target=self._update, daemon=True, name="kubernetes-source"
                )
                self._refresh.start()
            refresh = self._refresh
        if due and refresh is not None:
            refresh.join(wait)
        with self._lock:
            reading = self._reading
            errors = [
                sample(catalog.KUBERNETES_ERRORS, self._errors[kind], kind=kind)
                for kind in catalog.KUBERNETES_ERROR_KINDS
            ]
        return [
            *reading.samples,
            sample(catalog.KUBERNETES_UP, reading.ok),
            sample(catalog.COLLECTOR_SUCCESS, reading.ok, collector=SOURCE_NAME),
            sample(catalog.COLLECTOR_DURATION, reading.duration, collector=SOURCE_NAME),
            *errors,
        ]

    def _update(self) -> None:
        reading = self._read()
        with self._lock:
            self._reading = reading

    def _read(self) -> _Reading:
        started = time.monotonic()
        try:
            client = self._connect()
            found = self._pod_samples(client)
            if self.config.deployment:
                found += self._deployment_samples(client)
            if self.config.horizontalpodautoscaler:
                found += self._autoscaler_samples(client)
        except KubernetesError as error:
            with self._lock:
                self._errors[error.kind] += 1
            self.last_error = error.message
            return _Reading(ok=False, duration=time.monotonic() - started, taken_at=started)
        self.last_error = ""
        return _Reading(found, True, time.monotonic() - started, started)

    def _connect(self) -> KubernetesClient:
        if self._client is None:
            self._client = KubernetesClient(self._credentials(), self.config.timeout)
        return self._client

    def _default_credentials(self) -> Credentials:
        if self.config.kubeconfig:
            return from_kubeconfig(Path(self.config.kubeconfig))
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
                sample(catalog.WORKER_RESTARTS, container.get("restartCount", 0), pod=name)
            )
            terminated = (container.get("lastState") or {}).get("terminated") or {}
            if terminated.get("reason"):
                found.append(
                    sample(
                        catalog.WORKER_LAST_TERMINATION,
                        1,
                        pod=name,
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
        spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
        return [
            sample(catalog.WORKER_DEPLOYMENT_REPLICAS, spec.get("replicas", 0), state="desired"),
            sample(
                catalog.WORKER_DEPLOYMENT_REPLICAS,
                status.get("updatedReplicas", 0),
                state="updated",
            ),
            sample(
                catalog.WORKER_DEPLOYMENT_REPLICAS,
                status.get("availableReplicas", 0),
                state="available",
            ),
        ]

    def _autoscaler_samples(self, client: KubernetesClient) -> list[Sample]:
        hpa = client.get(
            f"/apis/autoscaling/v2/namespaces/{self.config.namespace}/"
            f"horizontalpodautoscalers/{self.config.horizontalpodautoscaler}",
            "horizontalpodautoscalers",
            "get",
        )
        spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
        return [
            sample(
                catalog.WORKER_AUTOSCALER_REPLICAS,
                status.get("currentReplicas", 0),
                state="current",
            ),
            sample(
                catalog.WORKER_AUTOSCALER_REPLICAS,
                status.get("desiredReplicas", 0),
                state="desired",
            ),
            sample(catalog.WORKER_AUTOSCALER_REPLICAS, spec.get("maxReplicas", 0), state="maximum"),
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
