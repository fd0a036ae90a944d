"""Credentials from a kubeconfig's `exec` plugin: the client.authentication.k8s.io
ExecCredential protocol (v1 and v1beta1), which `aws eks update-kubeconfig`
(`aws eks get-token`), `gke-gcloud-auth-plugin` and `kubelogin` write.

The command runs with the kubeconfig's arguments and environment, plus
KUBERNETES_EXEC_INFO (an ExecCredential whose spec says the session is not interactive,
and gives the cluster when `provideClusterInfo` is set); it prints an ExecCredential whose
status holds a token or a client certificate, and maybe when they expire. The answer is
kept until shortly before that time, or until the API answers 401. The command has
`EXEC_TIMEOUT` seconds, is killed with its process group after that, gets no terminal, and
what it prints is never logged as it came (it may hold the token).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from actionscheduler_exporter.kubernetes.errors import KubernetesError
from actionscheduler_exporter.kubernetes.redact import printable, sanitize

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_TIMEOUT = 30.0  # seconds the command may take
REFRESH_MARGIN = 30.0  # a credential is replaced this long before it expires
_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
_CLUSTER_CONFIG = "client.authentication.k8s.io/exec"  # the cluster extension passed on
_MAX_OUTPUT = 1024 * 1024
_API_VERSION_SHAPE = re.compile(r"client\.authentication\.k8s\.io/v[0-9a-z]{1,12}")

# What a legacy auth-provider is replaced by (kubectl removed gcp and azure in 1.26).
AUTH_PROVIDER_PLUGINS = {
    "gcp": "gke-gcloud-auth-plugin (`gcloud components install gke-gcloud-auth-plugin`, "
    "then `gcloud container clusters get-credentials` writes an exec user)",
    "azure": "kubelogin (`kubelogin convert-kubeconfig` writes an exec user)",
    "oidc": "an OIDC exec plugin such as kubelogin (`kubectl oidc-login`)",
}


@dataclass(frozen=True)
class ExecCredential:
    token: str | None
    client_certificate: str | None  # PEM
    client_key: str | None  # PEM
    expires_at: float | None  # seconds since the epoch; None: until a 401


@dataclass(frozen=True)
class ExecConfig:
    api_version: str
    command: str  # as written; a relative path is resolved against the kubeconfig's folder
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    install_hint: str
    cluster: dict[str, Any] | None  # spec.cluster of KUBERNETES_EXEC_INFO, when provided


def exec_config(
    settings: Any, kubeconfig: Path, cluster: dict[str, Any], cluster_ca: bytes | None
) -> ExecConfig:
    """The kubeconfig's `user.exec`, checked; raises KubernetesError (`config`)."""

    def refuse(problem: str) -> KubernetesError:
        return KubernetesError("config", f"kubeconfig {kubeconfig}: exec plugin {problem}")

    if not isinstance(settings, dict):
        raise refuse("settings are not a mapping")
    api_version = settings.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise refuse(
            f"apiVersion {_shown(api_version)} is not supported: write {' or '.join(API_VERSIONS)}"
        )
    command = settings.get("command")
    if not isinstance(command, str) or not command:
        raise refuse("has no command")
    args = settings.get("args") or []
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise refuse("args must be a list of strings")
    env = settings.get("env") or []
    if not isinstance(env, list) or not all(
        isinstance(entry, dict)
        and isinstance(entry.get("name"), str)
        and isinstance(entry.get("value"), str)
        for entry in env
    ):
        raise refuse("env must be a list of {name, value} strings")
    words = [command, *args, *(f"{entry['name']}={entry['value']}" for entry in env)]
    if any("\x00" in word for word in words) or any("=" in entry["name"] for entry in env):
        raise refuse("command, args or env hold a NUL character (or an env name an `=`)")
    mode = settings.get("interactiveMode", "IfAvailable")
    if mode not in _INTERACTIVE_MODES:
        raise refuse(f"interactiveMode must be one of {', '.join(_INTERACTIVE_MODES)}")
    if mode == "Always":
        raise refuse(
            f"{command!r} needs a terminal (interactiveMode: Always), which the exporter "
            "never has: configure the plugin to work unattended (interactiveMode: Never)"
        )
    if os.sep in command and not os.path.isabs(command):
        command = str(kubeconfig.parent / command)
    return ExecConfig(
        api_version=api_version,
        command=command,
        args=tuple(args),
        env=tuple((entry["name"], entry["value"]) for entry in env),
        install_hint=str(settings.get("installHint") or ""),
        cluster=_cluster_info(cluster, cluster_ca) if settings.get("provideClusterInfo") else None,
    )


def _cluster_info(cluster: dict[str, Any], ca: bytes | None) -> dict[str, Any]:
    info: dict[str, Any] = {"server": str(cluster.get("server", ""))}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key):
            info[key] = cluster[key]
    if ca:
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == _CLUSTER_CONFIG:
            info["config"] = extension.get("extension")
    return info


class ExecPlugin:
    """Runs the plugin when no credential is kept or the kept one is about to expire."""

    def __init__(
        self,
        config: ExecConfig,
        *,
        timeout: float = EXEC_TIMEOUT,
        now: Callable[[], float] = time.time,
    ) -> None:
        """`now`: wall-clock seconds (expiry times are dates); tests pass their own."""
        self.config = config
        self.timeout = timeout
        self._now = now
        self._lock = threading.Lock()
        self._kept: ExecCredential | None = None

    def credential(self, *, refresh: bool = False) -> ExecCredential:
        """The kept credential, or a new one (`refresh`: the API refused the kept one)."""
        with self._lock:
            kept = self._kept
            if (
                kept is None
                or refresh
                or (kept.expires_at is not None and self._now() >= kept.expires_at - REFRESH_MARGIN)
            ):
                self._kept = None
                kept = self._kept = self._run()
            return kept

    def _run(self) -> ExecCredential:
        name = os.path.basename(self.config.command)
        executable = shutil.which(self.config.command)
        if executable is None:
            hint = (
                f": {printable(self.config.install_hint, limit=300)}"
                if self.config.install_hint
                else ""
            )
            where = (
                "is not an executable file" if os.sep in self.config.command else "is not on PATH"
            )
            raise KubernetesError("config", f"exec plugin {self.config.command!r} {where}{hint}")
        spec: dict[str, Any] = {"interactive": False}
        if self.config.cluster is not None:
            spec["cluster"] = self.config.cluster
        env = {
            **os.environ,
            **dict(self.config.env),
            # default=str: a YAML date in the cluster's extension is no JSON type.
            "KUBERNETES_EXEC_INFO": json.dumps(
                {"apiVersion": self.config.api_version, "kind": "ExecCredential", "spec": spec},
                default=str,
            ),
        }
        try:
            process = subprocess.Popen(  # noqa: S603 (the operator's kubeconfig names it)
                [executable, *self.config.args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # its own process group, killed as one
            )
        except OSError as error:
            raise KubernetesError(
                "config", f"exec plugin {name!r} cannot be run: {error.strerror}"
            ) from None
        try:
            stdout, stderr = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill(process)
            raise KubernetesError(
                "config",
                f"exec plugin {name!r} did not finish within {self.timeout:g}s; killed",
            ) from None
        if process.returncode != 0:
            how = (
                f"was killed by signal {-process.returncode}"
                if process.returncode < 0
                else f"exited with status {process.returncode}"
            )
            said = _first_line(stderr)
            raise KubernetesError(
                "config", f"exec plugin {name!r} {how}" + (f" ({said})" if said else "")
            )
        return self._parse(name, stdout)

    def _parse(self, name: str, stdout: bytes) -> ExecCredential:
        def bad(problem: str) -> KubernetesError:
            # Never a word of the output: it is the credential.
            return KubernetesError("config", f"exec plugin {name!r} {problem}")

        if len(stdout) > _MAX_OUTPUT:
            raise bad(f"printed more than {_MAX_OUTPUT:,} bytes, not an ExecCredential")
        try:
            document = json.loads(stdout)
        except (ValueError, RecursionError):
            raise bad(f"printed something that is not JSON ({len(stdout)} bytes)") from None
        if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
            raise bad("printed JSON that is not an ExecCredential (kind)")
        if document.get("apiVersion") != self.config.api_version:
            raise bad(
                f"answered apiVersion {_shown(document.get('apiVersion'))}, "
                f"not the {self.config.api_version} the kubeconfig asks for"
            )
        status = document.get("status")
        if not isinstance(status, dict):
            raise bad("printed an ExecCredential without a status")
        token = status.get("token")
        certificate = status.get("clientCertificateData")
        key = status.get("clientKeyData")
        for field, value in (("token", token), ("clientCertificateData", certificate),
                             ("clientKeyData", key)):  # fmt: skip
            if value is not None and not isinstance(value, str):
                raise bad(f"printed a status.{field} that is not a string")
        if bool(certificate) != bool(key):
            raise bad("printed clientCertificateData without clientKeyData or the other way")
        if not token and not certificate:
            raise bad(
                "printed an ExecCredential with neither status.token nor a client certificate"
            )
        return ExecCredential(token or None, certificate or None, key or None, _expiry(status, bad))


def _expiry(status: dict[str, Any], bad: Callable[[str], KubernetesError]) -> float | None:
    written = status.get("expirationTimestamp")
    if written in (None, ""):
        return None
    try:
        moment = datetime.fromisoformat(str(written))
    except ValueError:
        raise bad("printed an expirationTimestamp that is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise bad("printed an expirationTimestamp without a time zone (RFC 3339 needs one)")
    return moment.timestamp()


def _shown(api_version: object) -> str:
    """An apiVersion as written, when it has the shape of one (never other text)."""
    if isinstance(api_version, str) and _API_VERSION_SHAPE.fullmatch(api_version):
        return repr(api_version)
    return "(missing)" if api_version is None else "(not an apiVersion)"


def _first_line(stderr: bytes) -> str:
    """The first non-empty line of what the plugin wrote to stderr, sanitized."""
    for line in stderr[:4096].decode(errors="replace").splitlines():
        if line.strip():
            return sanitize(line)
    return ""


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
