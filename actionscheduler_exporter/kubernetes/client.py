"""A small read-only Kubernetes API client: GET requests over HTTPS, nothing else.

Credentials come from the pod's service account (in-cluster: the token is re-read when it
rotates) or from a kubeconfig (local runs: a bearer token or a client certificate).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from actionscheduler_exporter.config.loader import YamlError, parse_yaml
from actionscheduler_exporter.errors import SourceError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubernetesError(SourceError):
    """A failed call, with a kind for the error counter and a message that says what to do."""


@dataclass
class Credentials:
    server: str
    ssl_context: ssl.SSLContext
    token: str | None = None
    token_file: Path | None = None
    _token_mtime: float = field(default=0.0, repr=False)

    def bearer(self, *, reload: bool = False) -> str | None:
        """The token; a token file is re-read when it changed (rotation) or on request."""
        if self.token_file is not None:
            mtime = self.token_file.stat().st_mtime
            if reload or self.token is None or mtime != self._token_mtime:
                self.token = self.token_file.read_text().strip()
                self._token_mtime = mtime
        return self.token


def in_cluster(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> Credentials:
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubernetesError(
            "config",
            "not running in a cluster (KUBERNETES_SERVICE_HOST is not set): give a kubeconfig",
        )
    token_file = service_account_dir / "token"
    if not token_file.is_file():
        raise KubernetesError(
            "config",
            f"no service-account token at {token_file}: the pod "
            "must mount its token (automountServiceAccountToken)",
        )
    context = ssl.create_default_context(cafile=str(service_account_dir / "ca.crt"))
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return Credentials(server, context, token_file=token_file)


def from_kubeconfig(path: Path) -> Credentials:
    try:
        config = parse_yaml(path.read_text())
    except OSError as error:
        raise KubernetesError(
            "config", f"cannot read kubeconfig {path}: {error.strerror}"
        ) from None
    except (YamlError, UnicodeDecodeError) as error:
        # Never the parser's own words: they may quote the token.
        problem = error if isinstance(error, YamlError) else "is not UTF-8 text"
        raise KubernetesError("config", f"kubeconfig {path} {problem}") from None
    try:
        context_name = config["current-context"]
        context = _named(config["contexts"], context_name)["context"]
        cluster = _named(config["clusters"], context["cluster"])["cluster"]
        user = _named(config.get("users", []), context["user"])["user"]
    except (KeyError, TypeError, LookupError) as error:
        raise KubernetesError(
            "config", f"kubeconfig {path}: no usable current context ({error})"
        ) from error
    if "exec" in user or "auth-provider" in user:
        raise KubernetesError(
            "config",
            f"kubeconfig {path}: exec and auth-provider "
            "credentials are not supported; use a token or a "
            "client certificate",
        )
    ssl_context = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        ssl_context.check_hostname = False
        ssl_context.verify_mode = ssl.CERT_NONE
    elif "certificate-authority-data" in cluster:
        ssl_context.load_verify_locations(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
    elif "certificate-authority" in cluster:
        ssl_context.load_verify_locations(cafile=cluster["certificate-authority"])
    _load_client_certificate(ssl_context, user)
    return Credentials(
        str(cluster["server"]).rstrip("/"),
        ssl_context,
        token=user.get("token"),
        token_file=Path(user["tokenFile"]) if "tokenFile" in user else None,
    )


class KubernetesClient:
    def __init__(self, credentials: Credentials, timeout: float) -> None:
        self.credentials = credentials
        self.timeout = timeout
        parts = urlsplit(credentials.server)
        self._host = parts.hostname or "localhost"
        self._port = parts.port or 443

    def get(self, path: str, resource: str, verb: str, **query: str) -> dict[str, Any]:
        """GET an API path; on 401 the token is re-read once (it may have rotated)."""
        url = path + (f"?{urlencode(query)}" if query else "")
        status, body = self._request(url, reload_token=False)
        if status == 401:
            status, body = self._request(url, reload_token=True)
        if status == 200:
            try:
                document: dict[str, Any] = json.loads(body)
            except json.JSONDecodeError as error:
                raise KubernetesError(
                    "http", f"{verb} {resource}: the API answered with something that is not JSON"
                ) from error
            return document
        message = _status_message(body)
        if status == 401:
            raise KubernetesError(
                "unauthorized",
                f"{verb} {resource}: the API rejected the exporter's credentials ({message})",
            )
        if status == 403:
            raise KubernetesError(
                "forbidden",
                f"{verb} {resource}: forbidden; the exporter's "
                f"service account needs RBAC verb {verb} on "
                f"{resource} in its Role ({message})",
            )
        if status == 404:
            raise KubernetesError("not_found", f"{verb} {resource}: not found ({message})")
        raise KubernetesError("http", f"{verb} {resource}: HTTP {status} ({message})")

    def _request(self, url: str, *, reload_token: bool) -> tuple[int, bytes]:
        headers = {"Accept": "application/json", "User-Agent": "actionscheduler-exporter"}
        token = self.credentials.bearer(reload=reload_token)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        connection = http.client.HTTPSConnection(
            self._host, self._port, timeout=self.timeout, context=self.credentials.ssl_context
        )
        try:
            connection.request("GET", url, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        except TimeoutError as error:
            raise KubernetesError(
                "timeout", f"GET {url}: no answer within {self.timeout:g}s"
            ) from error
        except (OSError, http.client.HTTPException) as error:
            raise KubernetesError("connect", f"GET {url}: {error}") from error
        finally:
            connection.close()


def _status_message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message", "")) or body[:200].decode(errors="replace")
    except (json.JSONDecodeError, AttributeError):
        return body[:200].decode(errors="replace")


def _named(entries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for entry in entries:
        if entry.get("name") == name:
            return entry
    raise LookupError(f"no entry named {name!r}")


def _load_client_certificate(context: ssl.SSLContext, user: dict[str, Any]) -> None:
    if "client-certificate" in user:
        context.load_cert_chain(user["client-certificate"], user.get("client-key"))
    elif "client-certificate-data" in user:
        # ssl loads certificates from files only: write them to a private temporary folder.
        with tempfile.TemporaryDirectory(prefix="ase-kube-") as folder:
            cert = Path(folder) / "client.crt"
            key = Path(folder) / "client.key"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            context.load_cert_chain(str(cert), str(key))
