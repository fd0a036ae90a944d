"""A local HTTPS server answering the Kubernetes API paths the exporter calls, with objects
shaped as the API returns them (PodList, apps/v1 Deployment, autoscaling/v2 HPA, Status).

No cluster can run here; this stands in for the API server only, never for the exporter's
own code. It records every call, so tests can compare them with the chart's Role.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from actionscheduler_exporter.config.model import KubernetesConfig
from testbed.certs import make_certificates

_ROUTES = [
    (re.compile(r"^/api/v1/namespaces/([^/]+)/pods$"), "", "pods", "list"),
    (
        re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/deployments/([^/]+)$"),
        "apps",
        "deployments",
        "get",
    ),
    (
        re.compile(r"^/apis/autoscaling/v2/namespaces/([^/]+)/horizontalpodautoscalers/([^/]+)$"),
        "autoscaling",
        "horizontalpodautoscalers",
        "get",
    ),
]


@dataclass(frozen=True)
class Call:
    verb: str
    api_group: str
    resource: str
    namespace: str
    name: str
    query: dict[str, list[str]]


def pod(
    name: str,
    *,
    ready: bool = True,
    restarts: int = 0,
    waiting: str = "",
    last_reason: str = "",
    container: str = "worker",
) -> dict[str, Any]:
    state: dict[str, Any] = (
        {"waiting": {"reason": waiting, "message": "back-off 5m0s"}}
        if waiting
        else {"running": {"startedAt": "2026-11-29T20:00:00Z"}}
    )
    status: dict[str, Any] = {
        "name": container,
        "ready": ready,
        "restartCount": restarts,
        "started": ready,
        "image": "registry.example/shop-wordpress:2026.11.1",
        "imageID": "sha256:abc",
        "containerID": "containerd://0123",
        "state": state,
        "lastState": {},
    }
    if last_reason:
        status["lastState"] = {
            "terminated": {
                "exitCode": 137 if last_reason == "OOMKilled" else 1,
                "reason": last_reason,
                "startedAt": "2026-11-29T19:00:00Z",
                "finishedAt": "2026-11-29T19:59:00Z",
                "containerID": "containerd://4567",
            }
        }
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "labels": {"app.kubernetes.io/component": "worker"},
        },
        "spec": {"containers": [{"name": container, "image": status["image"]}]},
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": "2026-11-29T20:00:00Z",
                }
            ],
            "containerStatuses": [status],
        },
    }


@dataclass
class FakeKubernetes:
    folder: Path
    token: str = "token-1"
    pods: list[dict[str, Any]] = field(default_factory=list)
    deployment: dict[str, Any] = field(
        default_factory=lambda: {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "shop-worker", "namespace": "shop"},
            "spec": {"replicas": 3},
            "status": {
                "replicas": 3,
                "updatedReplicas": 2,
                "readyReplicas": 2,
                "availableReplicas": 2,
            },
        }
    )
    hpa: dict[str, Any] = field(
        default_factory=lambda: {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "keda-hpa-shop-worker", "namespace": "shop"},
            "spec": {
                "minReplicas": 1,
                "maxReplicas": 4,
                "scaleTargetRef": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "shop-worker",
                },
            },
            "status": {"currentReplicas": 3, "desiredReplicas": 4},
        }
    )
    forbidden: set[str] = field(default_factory=set)  # resources answered with 403
    delay: float = 0.0
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        certificates = make_certificates(self.folder, "kubernetes")
        self.ca, cert, key = (certificates.ca, certificates.server_cert, certificates.server_key)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake._answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, token: str | None = None) -> Path:
        path = self.folder / "kubeconfig"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "test",
                    "clusters": [
                        {
                            "name": "test",
                            "cluster": {
                                "server": self.server,
                                "certificate-authority-data": base64.b64encode(
                                    self.ca.read_bytes()
                                ).decode(),
                            },
                        }
                    ],
                    "users": [{"name": "exporter", "user": {"token": token or self.token}}],
                    "contexts": [
                        {
                            "name": "test",
                            "context": {"cluster": "test", "user": "exporter", "namespace": "shop"},
                        }
                    ],
                }
            )
        )
        return path

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        if self.delay:
            time.sleep(self.delay)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            self._send(request, 401, _status(401, "Unauthorized", "Unauthorized"))
            return
        for pattern, group, resource, verb in _ROUTES:
            match = pattern.match(parts.path)
            if not match:
                continue
            namespace = match.group(1)
            name = match.group(2) if pattern.groups > 1 else ""
            self.calls.append(Call(verb, group, resource, namespace, name, parse_qs(parts.query)))
            if resource in self.forbidden:
                message = (
                    f'{resource} is forbidden: User "system:serviceaccount:shop:'
                    f'exporter" cannot {verb} resource "{resource}" in API group '
                    f'"{group}" in the namespace "{namespace}"'
                )
                self._send(request, 403, _status(403, "Forbidden", message))
                return
            body: dict[str, Any]
            if resource == "pods":
                body = {
                    "kind": "PodList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": "12345"},
                    "items": self.pods,
                }
            elif resource == "deployments":
                body = self.deployment
            else:
                body = self.hpa
            self._send(request, 200, body)
            return
        self._send(
            request, 404, _status(404, "NotFound", f"the server could not find {parts.path}")
        )

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, code: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        try:
            request.send_response(code)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(payload)))
            request.end_headers()
            request.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client gave up (timeout test)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def kubernetes_config(api: FakeKubernetes, **overrides: object) -> KubernetesConfig:
    fields: dict[str, object] = {
        "namespace": "shop",
        "selector": "app.kubernetes.io/component=worker",
        "container": "worker",
        "deployment": "shop-worker",
        "horizontalpodautoscaler": "keda-hpa-shop-worker",
        "cache": 0.001,
        "timeout": 2.0,
        "kubeconfig": str(api.kubeconfig()),
    }
    fields.update(overrides)
    return KubernetesConfig(**fields)  # type: ignore[arg-type]
