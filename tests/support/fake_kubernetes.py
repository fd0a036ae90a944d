"""A local HTTPS server answering the Kubernetes API paths the exporter calls, with objects
shaped as the API returns them (PodList, apps/v1 Deployment, autoscaling/v2 HPA, Status).

No cluster can run here; this stands in for the API server only, never for the exporter's
own code. It records every call, so tests can compare them with the chart's Role.

`hostile` makes it a broken or hostile API for every request: `deep` (a body of 200,000
`[`), `drip` (the whole answer a byte at a time), `huge` (a pod list streamed chunked,
hundreds of megabytes made on the fly), `huge_declared` (the same with its Content-Length
said up front), `echo` (an error whose text repeats the request's Authorization header,
with a newline and an ANSI escape), `echo_text` (the same as plain text, not a Status).
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import time
from collections.abc import Iterator
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
    hostile: str = ""  # see the module's docstring
    hostile_status: int = 200  # the status of `deep`, `echo` and `echo_text` answers
    drip_interval: float = 0.2  # seconds between two bytes of `drip`
    huge_bytes: int = 400 * 1024 * 1024
    # Require a client certificate signed by the fake's CA; one stands for a token.
    client_certificates: bool = False
    unauthorized: int = 0  # requests answered 401 for a wrong or missing token
    # Per `drip` or `huge*` answer that ended: the bytes it got out before the client
    # closed the connection (or all of them).
    sent: list[int] = field(default_factory=list)
    peers: list[str] = field(default_factory=list)  # client certificates' common names

    def __post_init__(self) -> None:
        certificates = make_certificates(self.folder, "kubernetes")
        self.ca, cert, key = (certificates.ca, certificates.server_cert, certificates.server_key)
        self.client_cert, self.client_key = certificates.client_cert, certificates.client_key
        self._stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # chunked answers (`huge`)

            def do_GET(self) -> None:
                fake._answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        if self.client_certificates:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(self.ca))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(
        self,
        token: str | None = None,
        user: dict[str, Any] | None = None,
        cluster: dict[str, Any] | None = None,
    ) -> Path:
        """`user`: the kubeconfig's user instead of the token; `cluster`: added fields."""
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
                                **(cluster or {}),
                            },
                        }
                    ],
                    "users": [{"name": "exporter", "user": user or {"token": token or self.token}}],
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
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        if self.delay:
            time.sleep(self.delay)
        if self.hostile:
            self._hostile(request)
            return
        connection = request.connection
        peer = connection.getpeercert() if isinstance(connection, ssl.SSLSocket) else None
        if peer:
            self.peers += re.findall(r"'commonName', '([^']*)'", str(peer.get("subject")))
        elif request.headers.get("Authorization") != f"Bearer {self.token}":
            self.unauthorized += 1
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

    def _hostile(self, request: BaseHTTPRequestHandler) -> None:
        mode = self.hostile
        if mode == "deep":
            self._send_bytes(request, self.hostile_status, b"[" * 200_000)
        elif mode in ("echo", "echo_text"):
            said = (
                f"invalid bearer token: the request had Authorization: "
                f"{request.headers.get('Authorization')}\n\x1b[31mlevel=info msg=forged"
            )
            if mode == "echo":
                status = _status(self.hostile_status, "Unauthorized", said)
                self._send(request, self.hostile_status, status)
            else:
                self._send_bytes(request, self.hostile_status, said.encode(), "text/plain")
        elif mode == "drip":
            payload = json.dumps({"kind": "PodList", "apiVersion": "v1", "items": self.pods})
            head = (
                f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n"
            )
            self._stream(request, (byte for byte in (head + payload).encode()), drip=True)
        elif mode in ("huge", "huge_declared"):
            self._stream(request, self._huge(mode == "huge_declared"), drip=False)
        else:
            raise ValueError(f"no hostile mode {mode!r}")

    def _huge(self, declared: bool) -> Iterator[bytes]:
        """A pod list of `huge_bytes`, made a chunk at a time (never held whole)."""
        opening = b'{"kind":"PodList","apiVersion":"v1","metadata":{},"items":['
        item = json.dumps(pod("shop-worker-5d9f7c6b8-zzzzz")).encode() + b","
        closing = b'{"metadata":{"name":"last"}}]}'
        count = (self.huge_bytes - len(opening) - len(closing)) // len(item)
        length = len(opening) + count * len(item) + len(closing)
        framing = f"Content-Length: {length}" if declared else "Transfer-Encoding: chunked"
        yield (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}\r\n\r\n").encode()
        per_chunk = max(1, 65536 // len(item))
        parts = [opening]
        for index in range(count):
            parts.append(item)
            if (index + 1) % per_chunk == 0:
                yield _framed(b"".join(parts), declared)
                parts = []
        parts.append(closing)
        yield _framed(b"".join(parts), declared)
        if not declared:
            yield b"0\r\n\r\n"

    def _stream(
        self, request: BaseHTTPRequestHandler, pieces: Iterator[bytes] | Iterator[int], drip: bool
    ) -> None:
        """Writes the pieces (bytes, or single byte values a `drip_interval` apart) until
        they end, the client closes the connection or the fake stops; counts what got out."""
        sent = 0
        try:
            for piece in pieces:
                data = bytes([piece]) if isinstance(piece, int) else piece
                request.wfile.write(data)
                request.wfile.flush()
                sent += len(data)
                if self._stopping.is_set():
                    break
                if drip and self._stopping.wait(self.drip_interval):
                    break
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            pass  # the client closed the connection
        finally:
            self.sent.append(sent)
            request.close_connection = True

    @staticmethod
    def _send_bytes(
        request: BaseHTTPRequestHandler,
        code: int,
        payload: bytes,
        content_type: str = "application/json",
    ) -> None:
        try:
            request.send_response(code)
            request.send_header("Content-Type", content_type)
            request.send_header("Content-Length", str(len(payload)))
            request.end_headers()
            request.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass

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


def _framed(data: bytes, declared: bool) -> bytes:
    return data if declared else f"{len(data):x}\r\n".encode() + data + b"\r\n"


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
