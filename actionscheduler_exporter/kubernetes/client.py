"""A small read-only Kubernetes API client: GET requests over HTTPS, nothing else.

Credentials come from the pod's service account (in-cluster: the token is re-read when it
rotates) or from a kubeconfig (local runs: a bearer token, a client certificate, or an
`exec` credential plugin such as `aws eks get-token` or `gke-gcloud-auth-plugin`).
Each request has one deadline and a bounded body (`transport`); what the API says in an
error is logged only sanitized (`redact`): it may echo the token.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from actionscheduler_exporter.config.loader import YamlError, parse_yaml
from actionscheduler_exporter.kubernetes.errors import KubernetesError
from actionscheduler_exporter.kubernetes.exec_credential import (
    AUTH_PROVIDER_PLUGINS,
    EXEC_TIMEOUT,
    ExecPlugin,
    exec_config,
)
from actionscheduler_exporter.kubernetes.redact import sanitize
from actionscheduler_exporter.kubernetes.transport import Answer, fetch

__all__ = ["Credentials", "KubernetesClient", "KubernetesError", "from_kubeconfig", "in_cluster"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass
class Credentials:
    server: str
    ssl_context: ssl.SSLContext
    token: str | None = None
    token_file: Path | None = None
    exec_plugin: ExecPlugin | None = None
    # A new context of the cluster's trust, for a client certificate an exec plugin hands
    # over (a context's certificate cannot be replaced).
    tls_factory: Callable[[], ssl.SSLContext] | None = None
    _token_mtime: float = field(default=0.0, repr=False)
    _exec_tls: tuple[tuple[str, str], ssl.SSLContext] | None = field(default=None, repr=False)

    def bearer(self, *, reload: bool = False) -> str | None:
        """The token; a token file is re-read when it changed (rotation) or on request, an
        exec plugin run again when its token is about to expire or on request."""
        if self.exec_plugin is not None:
            return self.exec_plugin.credential(refresh=reload).token
        if self.token_file is not None:
            try:
                mtime = self.token_file.stat().st_mtime
                if reload or self.token is None or mtime != self._token_mtime:
                    self.token = self.token_file.read_text().strip()
                    self._token_mtime = mtime
            except (OSError, UnicodeDecodeError) as error:
                problem = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
                raise KubernetesError(
                    "config", f"cannot read the token file {self.token_file}: {problem}"
                ) from None
        return self.token

    def authenticate(self, *, reload: bool = False) -> tuple[str | None, ssl.SSLContext]:
        """The bearer token (if any) and the TLS context (with the client certificate)."""
        if self.exec_plugin is None:
            return self.bearer(reload=reload), self.ssl_context
        credential = self.exec_plugin.credential(refresh=reload)
        if not (credential.client_certificate and credential.client_key):
            return credential.token, self.ssl_context
        pair = (credential.client_certificate, credential.client_key)
        if self._exec_tls is None or self._exec_tls[0] != pair:
            context = (self.tls_factory or ssl.create_default_context)()
            try:
                _load_pem_pair(context, pair[0].encode(), pair[1].encode())
            except (ssl.SSLError, ValueError):
                raise KubernetesError(
                    "config",
                    "the exec plugin's clientCertificateData and clientKeyData are not a "
                    "PEM certificate and its key",
                ) from None
            self._exec_tls = (pair, context)
        return credential.token, self._exec_tls[1]


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


def from_kubeconfig(
    path: Path, *, now: Callable[[], float] = time.time, exec_timeout: float = EXEC_TIMEOUT
) -> Credentials:
    """`now` (wall-clock seconds) and `exec_timeout` are for an exec plugin's credential."""
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
        if not isinstance(cluster, dict) or not isinstance(user, dict):
            raise TypeError("a cluster or user that is not a mapping")
        server = cluster["server"]
        if not isinstance(server, str) or not server.startswith("https://"):
            raise TypeError("the cluster's server is not an https:// address")
        if not isinstance(user.get("tokenFile", ""), str):
            raise TypeError("the user's tokenFile is not a path")
    except (KeyError, TypeError, LookupError) as error:
        raise KubernetesError(
            "config", f"kubeconfig {path}: no usable current context ({error})"
        ) from error
    if "auth-provider" in user:
        provider = user["auth-provider"]
        name = str(provider.get("name", "")) if isinstance(provider, dict) else ""
        instead = AUTH_PROVIDER_PLUGINS.get(name, "the provider's exec credential plugin")
        raise KubernetesError(
            "config",
            f"kubeconfig {path}: auth-provider {sanitize(name, limit=40)!r} credentials are "
            f"not supported (kubectl dropped them too); use an exec user with {instead}",
        )
    ca = _cluster_ca(path, cluster)

    def tls() -> ssl.SSLContext:
        return _cluster_context(path, cluster, ca)

    ssl_context = tls()
    try:
        _load_client_certificate(ssl_context, user)
    except (OSError, ssl.SSLError, ValueError, binascii.Error, KeyError):
        raise KubernetesError(
            "config", f"kubeconfig {path}: the user's client certificate or key does not load"
        ) from None
    plugin = None
    if "exec" in user:
        settings = exec_config(user["exec"], path, cluster, ca)
        plugin = ExecPlugin(settings, timeout=exec_timeout, now=now)
    return Credentials(
        server.rstrip("/"),
        ssl_context,
        token=user.get("token"),
        token_file=Path(user["tokenFile"]) if "tokenFile" in user else None,
        exec_plugin=plugin,
        tls_factory=tls,
    )


def _cluster_ca(path: Path, cluster: dict[str, Any]) -> bytes | None:
    """The cluster's CA certificates (PEM), if the kubeconfig names any."""
    try:
        if "certificate-authority-data" in cluster:
            return base64.b64decode(cluster["certificate-authority-data"], validate=True)
        if "certificate-authority" in cluster:
            return Path(cluster["certificate-authority"]).read_bytes()
    except (OSError, ValueError, TypeError, binascii.Error):
        raise KubernetesError(
            "config", f"kubeconfig {path}: the cluster's certificate authority does not load"
        ) from None
    return None


def _cluster_context(path: Path, cluster: dict[str, Any], ca: bytes | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif ca is not None:
        try:
            context.load_verify_locations(cadata=ca.decode())
        except (ssl.SSLError, ValueError):
            raise KubernetesError(
                "config", f"kubeconfig {path}: the cluster's certificate authority is not PEM"
            ) from None
    return context


class KubernetesClient:
    def __init__(self, credentials: Credentials, timeout: float) -> None:
        """`timeout`: seconds for each request as a whole (connect, headers, body)."""
        self.credentials = credentials
        self.timeout = timeout
        parts = urlsplit(credentials.server)
        self._host = parts.hostname or "localhost"
        self._port = parts.port or 443
        self._token: str | None = None

    def get(self, path: str, resource: str, verb: str, **query: str) -> dict[str, Any]:
        """GET an API path; on 401 the token is re-read once (it may have rotated)."""
        url = path + (f"?{urlencode(query)}" if query else "")
        answer = self._request(url, reload_token=False)
        if answer.status == 401:
            answer = self._request(url, reload_token=True)
        if answer.status == 200:
            return _document(answer.body, f"{verb} {resource}")
        detail = _detail(answer, self._token)
        if answer.status == 401:
            raise KubernetesError(
                "unauthorized",
                f"{verb} {resource}: the API rejected the exporter's credentials ({detail})",
            )
        if answer.status == 403:
            raise KubernetesError(
                "forbidden",
                f"{verb} {resource}: forbidden; the exporter's "
                f"service account needs RBAC verb {verb} on "
                f"{resource} in its Role ({detail})",
            )
        if answer.status == 404:
            raise KubernetesError("not_found", f"{verb} {resource}: not found ({detail})")
        raise KubernetesError("http", f"{verb} {resource}: {detail}")

    def _request(self, url: str, *, reload_token: bool) -> Answer:
        headers = {"Accept": "application/json", "User-Agent": "actionscheduler-exporter"}
        token, context = self.credentials.authenticate(reload=reload_token)
        self._token = token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            return fetch(self._host, self._port, context, url, headers, self.timeout)
        except KubernetesError as error:
            raise KubernetesError(error.kind, f"GET {url}: {error.message}") from None


def _document(body: bytes, call: str) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except RecursionError:
        # json gives up past ~1,000 nested arrays or objects: no API object is so deep.
        raise KubernetesError(
            "http", f"{call}: the API's answer is nested too deep to be a Kubernetes object"
        ) from None
    except ValueError:
        raise KubernetesError(
            "http", f"{call}: the API answered with something that is not JSON"
        ) from None
    if not isinstance(document, dict):
        raise KubernetesError("http", f"{call}: the API answered with JSON that is not an object")
    return document


def _detail(answer: Answer, token: str | None) -> str:
    """The status code, and the reason and message of the API's Status, sanitized."""
    reason, message = answer.reason, ""
    try:
        status = json.loads(answer.body)
    except (ValueError, RecursionError):
        status = None
        message = answer.body[:1024].decode(errors="replace")
    if isinstance(status, dict):
        if isinstance(status.get("reason"), str) and status["reason"]:
            reason = status["reason"]
        if isinstance(status.get("message"), str):
            message = status["message"]
    detail = f"HTTP {answer.status}"
    if reason := sanitize(reason, [token], limit=40):
        detail += f" {reason}"
    if message := sanitize(message, [token]):
        detail += f": {message}"
    return detail


def _named(entries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for entry in entries:
        if entry.get("name") == name:
            return entry
    raise LookupError(f"no entry named {name!r}")


def _load_client_certificate(context: ssl.SSLContext, user: dict[str, Any]) -> None:
    if "client-certificate" in user:
        context.load_cert_chain(user["client-certificate"], user.get("client-key"))
    elif "client-certificate-data" in user:
        _load_pem_pair(
            context,
            base64.b64decode(user["client-certificate-data"]),
            base64.b64decode(user["client-key-data"]),
        )


def _load_pem_pair(context: ssl.SSLContext, certificate: bytes, key: bytes) -> None:
    # ssl loads certificates from files only: write them to a private temporary folder.
    with tempfile.TemporaryDirectory(prefix="ase-kube-") as folder:
        cert_path = Path(folder) / "client.crt"
        key_path = Path(folder) / "client.key"
        cert_path.write_bytes(certificate)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        context.load_cert_chain(str(cert_path), str(key_path))
