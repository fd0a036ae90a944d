"""exporter-toolkit's web configuration and flags, complete (issue 39, item 3), and a
SIGHUP that applies every TLS setting or none (issue 36, item 2): the real process, real
TLS handshakes with Python's ssl clients, a real SIGHUP."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testbed.certs import Certificates, make_certificates
from testbed.mariadb import Server
from testbed.ports import free_port
from testbed.store import ActionSchedulerStore
from tests.support.waiting import port_open, wait_until

RELOAD_OK = "actionscheduler_exporter_config_last_reload_successful"
RELOAD_AT = "actionscheduler_exporter_config_last_reload_success_timestamp_seconds"
# A refused handshake, a connection closed after it, or reset: whatever the client meets.
REFUSALS = (OSError, http.client.HTTPException)


@dataclass(frozen=True)
class Client:
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def client_with_sans(certificates: Certificates, folder: Path, name: str, sans: str) -> Client:
    """A client certificate from the test CA with these SANs ("DNS:a,IP:127.0.0.2")."""
    folder.mkdir(parents=True, exist_ok=True)
    key, request, cert = folder / f"{name}.key", folder / f"{name}.csr", folder / f"{name}.crt"
    extensions = folder / f"{name}.ext"
    extensions.write_text(
        f"subjectAltName={sans}\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\nauthorityKeyIdentifier=keyid\n"
    )

    def openssl(*arguments: object) -> None:
        subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True)

    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request,
            "-subj", f"/CN={name}")  # fmt: skip
    openssl("x509", "-req", "-in", request, "-CA", certificates.ca,
            "-CAkey", certificates.ca.with_suffix(".key"), "-CAcreateserial", "-out", cert,
            "-days", "2", "-extfile", extensions)  # fmt: skip
    return Client(cert, key)


def context(
    certificates: Certificates,
    client: Client | None = None,
    *,
    maximum: ssl.TLSVersion | None = None,
    minimum: ssl.TLSVersion | None = None,
    ciphers: str | None = None,
    curve: str | None = None,
) -> ssl.SSLContext:
    made = ssl.create_default_context(cafile=str(certificates.ca))
    if client is not None:
        made.load_cert_chain(str(client.cert), str(client.key))
    if maximum is not None:
        made.maximum_version = maximum
    if minimum is not None:
        made.minimum_version = minimum
    if ciphers is not None:
        made.set_ciphers(ciphers)
    if curve is not None:
        made.set_ecdh_curve(curve)
    return made


def fetch(port: int, tls: ssl.SSLContext | None, path: str = "/metrics") -> tuple[int, str]:
    connection: http.client.HTTPConnection = (
        http.client.HTTPSConnection("127.0.0.1", port, context=tls, timeout=20)
        if tls is not None
        else http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    )
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def refused(port: int, tls: ssl.SSLContext) -> bool:
    try:
        fetch(port, tls)
    except REFUSALS:
        return True
    return False


def negotiated(port: int, tls: ssl.SSLContext) -> tuple[str, str]:
    """The TLS version and cipher of a handshake with the exporter."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=20) as raw,
        tls.wrap_socket(raw, server_hostname="127.0.0.1") as secure,
    ):
        version, cipher = secure.version(), secure.cipher()
    assert version is not None and cipher is not None
    return version, cipher[0]


def value(body: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", body, flags=re.MULTILINE)
    assert found, f"{name} is not in the answer"
    return float(found.group(1))


Start = Callable[..., tuple[subprocess.Popen[str], Path]]


@pytest.fixture
def start(
    tmp_path: Path, mariadb: Server, database: str, store: ActionSchedulerStore
) -> Iterator[Start]:
    """Starts the exporter with these arguments, one site from the environment; its
    stderr goes to a log file."""
    started: list[subprocess.Popen[str]] = []
    auth = mariadb.user + (f":{mariadb.password}" if mariadb.password else "")
    environment = {
        **os.environ,
        "AS_EXPORTER_DSN": f"mysql://{auth}@{mariadb.host}:{mariadb.port}/{database}",
    }

    def run(
        *args: str, prefix: tuple[str, ...] = (), **popen: object
    ) -> tuple[subprocess.Popen[str], Path]:
        log = tmp_path / f"exporter-{len(started)}.log"
        with log.open("w") as stderr:
            process = subprocess.Popen(  # type: ignore[call-overload]
                [*prefix, sys.executable, "-m", "actionscheduler_exporter", *args],
                env=environment, stdout=subprocess.DEVNULL, stderr=stderr, text=True, **popen,
            )  # fmt: skip
        started.append(process)
        return process, log

    yield run
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def ready(process: subprocess.Popen[str], log: Path, port: int) -> None:
    if not wait_until(lambda: port_open(port) or process.poll() is not None, 30):
        pytest.fail(f"the exporter does not listen on {port}: {log.read_text()}")
    assert process.poll() is None, log.read_text()


def test_a_reload_applies_client_certificates_and_versions_or_keeps_the_old_ones(
    tmp_path: Path, certificates: Certificates, start: Start
) -> None:
    """Issue 36, item 2: a reload that asked for client certificates and TLS 1.3 was
    logged as applied while clients without a certificate, over TLS 1.2, still got 200:
    only the certificate and key reached the running context."""
    web = tmp_path / "web.yml"
    server = f"tls_server_config:\n  cert_file: {certificates.server_cert}\n"
    server += f"  key_file: {certificates.server_key}\n"
    web.write_text(server)
    port = free_port()
    process, log = start("--web.config.file", str(web), "--web.listen-address", f"127.0.0.1:{port}")
    ready(process, log, port)
    anonymous = context(certificates)
    tls12 = context(certificates, maximum=ssl.TLSVersion.TLSv1_2)
    status, body = fetch(port, anonymous)
    assert status == 200 and value(body, RELOAD_OK) == 1
    started_at = value(body, RELOAD_AT)
    assert fetch(port, tls12)[0] == 200

    web.write_text(
        f"{server}  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_ca_file: {certificates.ca}\n  min_version: TLS13\n"
    )
    process.send_signal(signal.SIGHUP)
    assert wait_until(lambda: refused(port, anonymous), 30), log.read_text()
    # Logged once all of it is applied (the TLS context is swapped a moment before).
    assert wait_until(lambda: "configuration reloaded" in log.read_text(), 30)
    client = Client(certificates.client_cert, certificates.client_key)
    assert refused(port, context(certificates, client, maximum=ssl.TLSVersion.TLSv1_2))
    with_cert = context(certificates, client)
    assert negotiated(port, with_cert)[0] == "TLSv1.3"
    status, body = fetch(port, with_cert)
    assert status == 200 and value(body, RELOAD_OK) == 1
    reloaded_at = value(body, RELOAD_AT)
    assert reloaded_at >= started_at

    # A configuration that cannot apply: refused with its reason, the old one serves on.
    web.write_text(f"{server}  client_auth_type: RequireAndVerifyClientCert\n")
    process.send_signal(signal.SIGHUP)
    assert wait_until(lambda: "reload failed" in log.read_text(), 30)
    assert "client_ca_file: is needed with client_auth_type RequireAndVerifyClientCert" in (
        log.read_text()
    )
    status, body = fetch(port, with_cert)
    assert status == 200 and value(body, RELOAD_OK) == 0
    assert value(body, RELOAD_AT) == reloaded_at
    assert refused(port, anonymous)
    assert refused(port, context(certificates, client, maximum=ssl.TLSVersion.TLSv1_2))


NODE_EXPORTER_WEB_CONFIG = """\
tls_server_config:
  cert_file: {server_cert}
  key_file: {server_key}
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: {ca}
  client_allowed_sans:
    - prometheus.monitoring.svc
    - 2001:db8::7
  min_version: TLS12
  max_version: TLS12
  cipher_suites:
    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
    - TLS_AES_128_GCM_SHA256
  prefer_server_cipher_suites: true
  curve_preferences:
    - CurveP256
    - X25519
http_server_config:
  http2: true
  headers:
    X-Frame-Options: deny
"""


def test_a_node_exporter_web_config_serves_unchanged_on_every_listen_address(
    tmp_path: Path, certificates: Certificates, start: Start
) -> None:
    """Issue 39, item 3: max_version, cipher_suites, prefer_server_cipher_suites,
    curve_preferences, client_allowed_sans and http2 were refused (exit 2), and of
    several --web.listen-address only the last listened."""
    web = tmp_path / "web.yml"
    web.write_text(
        NODE_EXPORTER_WEB_CONFIG.format(
            server_cert=certificates.server_cert,
            server_key=certificates.server_key,
            ca=certificates.ca,
        )
    )
    first, second = free_port(), free_port()
    process, log = start(
        "--web.config.file", str(web),
        "--web.listen-address", f"127.0.0.1:{first}", "--web.listen-address", f"127.0.0.1:{second}",
    )  # fmt: skip
    ready(process, log, first)
    allowed = client_with_sans(certificates, tmp_path, "allowed", "DNS:prometheus.monitoring.svc")
    by_ip = client_with_sans(certificates, tmp_path, "by-ip", "IP:2001:db8:0:0:0:0:0:7")
    other = client_with_sans(certificates, tmp_path, "other", "DNS:grafana.monitoring.svc")
    for port in (first, second):
        status, body = fetch(port, context(certificates, allowed))
        assert status == 200 and "actionscheduler_up" in body
        assert fetch(port, context(certificates, by_ip))[0] == 200
        # A certificate of the same CA without an allowed SAN, or none: refused.
        assert refused(port, context(certificates, other))
        assert refused(port, context(certificates))
    # The plain test client certificate has no SAN at all.
    no_san = Client(certificates.client_cert, certificates.client_key)
    assert refused(first, context(certificates, no_san))

    # max_version: a client that speaks TLS 1.3 only is refused; the server's cipher order.
    assert refused(first, context(certificates, allowed, minimum=ssl.TLSVersion.TLSv1_3))
    assert negotiated(first, context(certificates, allowed)) == (
        "TLSv1.2",
        "ECDHE-RSA-AES128-GCM-SHA256",
    )
    # Only the listed suites: a client that offers another is refused.
    assert refused(first, context(certificates, allowed, ciphers="ECDHE-RSA-CHACHA20-POLY1305"))
    # The curve: P-256 (the first listed); a client with X25519 only cannot agree on one.
    assert negotiated(first, context(certificates, allowed, curve="prime256v1"))[0] == "TLSv1.2"
    assert refused(first, context(certificates, allowed, curve="X25519"))


@pytest.mark.parametrize(
    ("setting", "key", "problem"),
    [
        ("  cipher_suites: [TLS_FOO]\n", "cipher_suites", "not a cipher suite Go knows"),
        (
            "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
            "cipher_suites",
            "not offered by this OpenSSL",
        ),
        ("  curve_preferences: [P256]\n", "curve_preferences", "must be among CurveP256"),
        ("  min_version: TLS13\n  max_version: TLS12\n", "max_version", "below min_version"),
        ("  max_version: TLS14\n", "max_version", "must be one of TLS10"),
        ("  client_allowed_sans: [a]\n", "client_allowed_sans", "needs a client_auth_type"),
        ("  prefer_server_cipher_suites: yes please\n", "prefer_server_cipher_suites", "true"),
    ],
)
def test_toolkit_settings_that_cannot_work_are_named(
    tmp_path: Path, certificates: Certificates, setting: str, key: str, problem: str
) -> None:
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {certificates.server_cert}\n"
        f"  key_file: {certificates.server_key}\n{setting}"
    )
    done = subprocess.run(
        [sys.executable, "-m", "actionscheduler_exporter", "--web.config.file", str(web)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "AS_EXPORTER_DSN": "mysql://u@h/d"},
    )  # fmt: skip
    assert done.returncode == 2
    assert f"{web}: tls_server_config.{key}: " in done.stderr and problem in done.stderr


def test_systemd_socket_activation(start: Start) -> None:
    """Issue 39, item 3: --web.systemd-socket serves on the socket systemd passes as file
    descriptor 3 (LISTEN_FDS=1, LISTEN_PID the exporter's own), as exporter-toolkit
    does. Here a small Python program plays systemd: it puts the test's socket on fd 3,
    sets the variables with its own pid and execs the exporter (which keeps the pid)."""
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    fd = listening.fileno()
    systemd = (
        sys.executable,
        "-c",
        "import os, sys; os.dup2(int(sys.argv[1]), 3); os.close(int(sys.argv[1]));"
        " os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1');"
        " os.execv(sys.argv[2], sys.argv[2:])",
        str(fd),
    )
    try:
        process, log = start("--web.systemd-socket", prefix=systemd, pass_fds=(fd,))
    finally:
        listening.close()  # the exporter has its own copy

    def answers() -> bool:
        if process.poll() is not None:
            return True
        try:
            return fetch(port, None, "/healthz")[0] == 200
        except OSError:
            return False

    assert wait_until(answers, 30) and process.poll() is None, log.read_text()
    assert fetch(port, None)[0] == 200
    assert f"listen=127.0.0.1:{port}" in log.read_text()


def test_systemd_socket_without_sockets_says_so() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "actionscheduler_exporter", "--web.systemd-socket"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "AS_EXPORTER_DSN": "mysql://u@h/d", "LISTEN_FDS": "1"},
    )  # fmt: skip
    assert done.returncode == 1
    assert "--web.systemd-socket: no sockets were passed" in done.stderr
