"""Issue 39, item 7: kubeconfigs of EKS and GKE (`aws eks update-kubeconfig`,
`gke-gcloud-auth-plugin`) name an exec credential plugin. A fake plugin (a Python script
this test writes) speaks the client.authentication.k8s.io ExecCredential protocol to the
exporter, which uses its token against the local fake API (tests/support/fake_kubernetes.py)."""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from actionscheduler_exporter.collectors.workers import KubernetesWorkers
from actionscheduler_exporter.kubernetes.client import KubernetesError, from_kubeconfig
from actionscheduler_exporter.metrics import catalog
from tests.support.fake_kubernetes import FakeKubernetes, kubernetes_config
from tests.support.waiting import wait_until

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
SECRET = "k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_QWN0aW9uPUdldENhbGxlcklkZW50aXR5"

PLUGIN = f"""#!{sys.executable}
import datetime, json, os, pathlib, subprocess, sys, time

state = pathlib.Path(os.environ["PLUGIN_STATE"])
runs = state / "runs"
run = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(run))
(state / f"info-{{run}}.json").write_text(os.environ.get("KUBERNETES_EXEC_INFO", ""))
(state / f"argv-{{run}}.json").write_text(json.dumps(sys.argv[1:]))
(state / "pid").write_text(str(os.getpid()))
mode = (state / "mode").read_text() if (state / "mode").exists() else "token"
api_version = json.loads(os.environ["KUBERNETES_EXEC_INFO"])["apiVersion"]
if mode == "fail":
    sys.stderr.write("\\n  error: token {SECRET} refused\\x1b[31m\\nsecond line\\n")
    sys.exit(3)
if mode == "sleep":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (state / "child").write_text(str(child.pid))
    time.sleep(600)
if mode == "badjson":
    print('{{"kind": "ExecCredential", "status": {{"token": "{SECRET}"')
    sys.exit(0)
expires = state / "expires"  # seconds since the epoch, written by the test
at = float(expires.read_text()) if expires.exists() else time.time() + 3600
expiry = datetime.datetime.fromtimestamp(at, datetime.timezone.utc)
status = {{"token": f"exec-token-{{run}}", "expirationTimestamp": expiry.isoformat()}}
if mode == "notoken":
    status = {{"expirationTimestamp": status["expirationTimestamp"]}}
if mode == "wrongversion":
    api_version = "client.authentication.k8s.io/v1alpha1"
if mode == "cert":
    status = {{
        "clientCertificateData": pathlib.Path(os.environ["PLUGIN_CERT"]).read_text(),
        "clientKeyData": pathlib.Path(os.environ["PLUGIN_KEY"]).read_text(),
    }}
print(json.dumps({{"apiVersion": api_version, "kind": "ExecCredential", "status": status}}))
"""


class Plugin:
    """The fake plugin's folder: how often it ran and what it was given."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.state = folder / "plugin-state"
        self.state.mkdir()
        self.script = folder / "plugin.py"
        self.script.write_text(PLUGIN)
        self.script.chmod(0o755)

    @property
    def runs(self) -> int:
        path = self.state / "runs"
        return int(path.read_text()) if path.exists() else 0

    def mode(self, mode: str) -> None:
        (self.state / "mode").write_text(mode)

    def expires(self, at: float) -> None:
        (self.state / "expires").write_text(repr(at))

    def info(self, run: int) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.state / f"info-{run}.json").read_text())
        return loaded

    def pid(self, name: str = "pid") -> int:
        return int((self.state / name).read_text())

    def user(self, api_version: str = V1BETA1, **settings: Any) -> dict[str, Any]:
        exec_settings: dict[str, Any] = {
            "apiVersion": api_version,
            # Relative to the kubeconfig's folder, as kubectl resolves it.
            "command": "./plugin.py",
            "args": ["token", "--cluster-name", "shop"],
            "env": [{"name": "PLUGIN_STATE", "value": str(self.state)}],
            "interactiveMode": "IfAvailable",
            "provideClusterInfo": True,
        }
        exec_settings.update(settings)
        return {"exec": exec_settings}


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    return Plugin(tmp_path)


def kubeconfig(api: FakeKubernetes, user: dict[str, Any]) -> Path:
    extension = {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "shop"}}
    written = api.kubeconfig(user=user, cluster={"extensions": [extension]})
    # Aside: kubernetes_config() writes the fake's token kubeconfig to the same name.
    return written.replace(written.with_name("exec-kubeconfig"))


def failure(api: FakeKubernetes, user: dict[str, Any], **options: Any) -> KubernetesError:
    path = kubeconfig(api, user)
    source = KubernetesWorkers(
        kubernetes_config(api, kubeconfig=str(path)),
        credentials=lambda: from_kubeconfig(path, **options),
    )
    with pytest.raises(KubernetesError) as raised:
        source.read()
    assert raised.value.kind == "config"
    return raised.value


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_the_plugins_token_is_used_kept_and_refreshed_before_it_expires(
    api: FakeKubernetes, plugin: Plugin, api_version: str
) -> None:
    started = time.time()
    clock = [started]
    plugin.expires(started + 3600)
    path = kubeconfig(api, plugin.user(api_version))
    source = KubernetesWorkers(
        kubernetes_config(api, kubeconfig=str(path)),
        credentials=lambda: from_kubeconfig(path, now=lambda: clock[0]),
    )
    api.token = "exec-token-1"
    assert source.read()  # the fake answers 401 to any other Authorization
    assert plugin.runs == 1
    info = plugin.info(1)
    assert info["apiVersion"] == api_version and info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    cluster = info["spec"]["cluster"]
    assert cluster["server"] == api.server
    assert base64.b64decode(cluster["certificate-authority-data"]) == api.ca.read_bytes()
    assert cluster["config"] == {"audience": "shop"}
    argv = json.loads((plugin.state / "argv-1.json").read_text())
    assert argv == ["token", "--cluster-name", "shop"]

    # Kept while valid: no second run.
    assert source.read()
    assert plugin.runs == 1
    # An hour later the token is about to expire: a new one before any request fails.
    api.token = "exec-token-2"
    clock[0] = started + 3600 - 10
    plugin.expires(started + 7200)
    refused = api.unauthorized
    assert source.read()
    assert plugin.runs == 2
    assert api.unauthorized == refused


def test_a_401_runs_the_plugin_again(api: FakeKubernetes, plugin: Plugin) -> None:
    path = kubeconfig(api, plugin.user())
    source = KubernetesWorkers(kubernetes_config(api, kubeconfig=str(path)))
    api.token = "exec-token-1"
    assert source.read()
    api.token = "exec-token-2"  # revoked before its expiry
    assert source.read()
    assert plugin.runs == 2
    api.token = "exec-token-never"
    with pytest.raises(KubernetesError) as raised:
        source.read()
    assert raised.value.kind == "unauthorized"


def test_a_client_certificate_from_the_plugin(tmp_path: Path) -> None:
    api = FakeKubernetes(tmp_path, client_certificates=True)
    try:
        plugin = Plugin(tmp_path)
        plugin.mode("cert")
        user = plugin.user(
            env=[
                {"name": "PLUGIN_STATE", "value": str(plugin.state)},
                {"name": "PLUGIN_CERT", "value": str(api.client_cert)},
                {"name": "PLUGIN_KEY", "value": str(api.client_key)},
            ]
        )
        source = KubernetesWorkers(kubernetes_config(api, kubeconfig=str(kubeconfig(api, user))))
        samples = source.read()
        assert [s for s in samples if s.metric is catalog.WORKER_PODS]
        assert api.peers and set(api.peers) == {"prometheus"}  # the certificate's name
    finally:
        api.stop()


def test_a_missing_command_names_it_and_its_install_hint(api: FakeKubernetes) -> None:
    hint = "Install the AWS CLI: https://docs.aws.amazon.com/cli/"
    error = failure(
        api,
        {
            "exec": {
                "apiVersion": V1BETA1,
                "command": "aws-no-such-plugin-7f3a",
                "args": ["eks", "get-token"],
                "installHint": hint,
            }
        },
    )
    assert "'aws-no-such-plugin-7f3a' is not on PATH" in error.message
    assert hint in error.message


def test_a_failing_plugin_is_reported_without_its_raw_stderr(
    api: FakeKubernetes, plugin: Plugin
) -> None:
    plugin.mode("fail")
    error = failure(api, plugin.user())
    assert "'plugin.py' exited with status 3" in error.message
    assert "error: token [redacted] refused" in error.message  # its first line, sanitized
    assert SECRET not in error.message and SECRET[12:40] not in error.message
    assert "\x1b" not in error.message and "second line" not in error.message


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("badjson", "printed something that is not JSON"),
        ("notoken", "neither status.token nor a client certificate"),
        ("wrongversion", "answered apiVersion 'client.authentication.k8s.io/v1alpha1'"),
    ],
)
def test_a_plugin_that_prints_no_credential_is_a_clear_error(
    api: FakeKubernetes, plugin: Plugin, mode: str, says: str
) -> None:
    plugin.mode(mode)
    error = failure(api, plugin.user())
    assert says in error.message
    assert SECRET not in error.message


def test_a_plugin_that_hangs_is_killed_with_its_children(
    api: FakeKubernetes, plugin: Plugin
) -> None:
    plugin.mode("sleep")
    started = time.monotonic()
    error = failure(api, plugin.user(), exec_timeout=1.0)
    assert time.monotonic() - started < 20.0  # bounded; it would sleep ten minutes
    assert "did not finish within 1s; killed" in error.message
    assert wait_until(lambda: not alive(plugin.pid()), 10)
    assert wait_until(lambda: not alive(plugin.pid("child")), 10)


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent to reap it."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.parametrize(
    ("user", "says"),
    [
        (
            {"auth-provider": {"name": "gcp", "config": {"access-token": SECRET}}},
            "use an exec user with gke-gcloud-auth-plugin",
        ),
        ({"auth-provider": {"name": "oidc"}}, "kubelogin"),
        (
            {"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}},
            "apiVersion 'client.authentication.k8s.io/v1alpha1' is not supported",
        ),
        (
            {"exec": {"apiVersion": V1, "command": "x", "interactiveMode": "Always"}},
            "needs a terminal (interactiveMode: Always)",
        ),
        ({"exec": {"apiVersion": V1, "command": "x", "env": ["A=1"]}}, "env must be a list"),
        (
            {"exec": {"apiVersion": V1, "command": "x", "env": [{"name": "A", "value": "\0"}]}},
            "hold a NUL character",
        ),
    ],
)
def test_kubeconfigs_the_exporter_cannot_use_say_what_to_write_instead(
    api: FakeKubernetes, user: dict[str, Any], says: str
) -> None:
    with pytest.raises(KubernetesError) as raised:
        from_kubeconfig(kubeconfig(api, user))
    assert raised.value.kind == "config"
    assert says in raised.value.message
    assert SECRET not in raised.value.message


def test_the_source_counts_a_plugin_failure_and_recovers(
    api: FakeKubernetes, plugin: Plugin
) -> None:
    """Through the round's reader: a failed run is a reading failed with kind config."""
    from actionscheduler_exporter.sources.counters import SiteCounters
    from actionscheduler_exporter.sources.reader import SourceReader

    observer = SourceReader(SiteCounters(), time.monotonic)
    source = KubernetesWorkers(
        kubernetes_config(api, kubeconfig=str(kubeconfig(api, plugin.user())))
    )
    plugin.mode("fail")
    reading = observer.read(source, None, "shop")
    assert not reading.ok and reading.failure == "config"
    counted = {dict(s.labels)["kind"]: s.value for s in observer.error_samples("shop", source)}
    assert counted["config"] == 1
    plugin.mode("token")
    api.token = f"exec-token-{plugin.runs + 1}"
    assert observer.read(source, None, "shop").ok


def test_a_cluster_without_an_https_server_is_a_configuration_error(api: FakeKubernetes) -> None:
    """The client speaks HTTPS only: an http:// server (kubectl proxy) failed at every
    request with a TLS error, a server that is not a string later still."""
    for cluster in ({"server": "http://127.0.0.1:8001"}, {"server": None}):
        with pytest.raises(KubernetesError, match="server is not an https:// address"):
            from_kubeconfig(api.kubeconfig(cluster=cluster))


def test_a_kubeconfig_under_the_home_folder(
    api: FakeKubernetes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README writes `kubeconfig: ~/.kube/config`; the `~` was taken literally."""
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    api.kubeconfig().replace(home / ".kube" / "config")
    monkeypatch.setenv("HOME", str(home))
    assert KubernetesWorkers(kubernetes_config(api, kubeconfig="~/.kube/config")).read()
