"""Secure by default: TLS and basic auth on the exporter's endpoint (exporter-toolkit's web
configuration, real TLS clients), TLS to the database with verification, a warning for a
database user that could write, and no secret anywhere."""

from __future__ import annotations

import base64
import logging
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import pytest

from exporter.config import ConfigError, SiteConfig
from exporter.config.model import TLSConfig
from exporter.db.grants import can_write
from exporter.web.webconfig import load_web_config
from testbed.certs import Certificates, make_certificates
from testbed.mariadb import Server, start_private, temporary
from testbed.ports import free_port
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.waiting import port_open, wait_until

PASSWORD = "scrape-me-please"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def web_config(tmp_path: Path, certificates: Certificates, client_auth: bool = False) -> Path:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    hashed = "$2y$" + hashed[4:]  # the form htpasswd writes
    client = (
        (f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certificates.ca}\n")
        if client_auth
        else ""
    )
    path = tmp_path / "web.yml"
    path.write_text(
        "tls_server_config:\n"
        f"  cert_file: {certificates.server_cert}\n"
        f"  key_file: {certificates.server_key}\n"
        f"{client}"
        "basic_auth_users:\n"
        f"  prometheus: '{hashed}'\n"
        "http_server_config:\n"
        "  headers: {X-Content-Type-Options: nosniff}\n"
    )
    return path


@pytest.fixture
def serve(
    mariadb: Server, database: str, store: ActionSchedulerStore
) -> Iterator[Callable[..., tuple[subprocess.Popen[str], int]]]:
    started: list[subprocess.Popen[str]] = []

    def run(*args: str) -> tuple[subprocess.Popen[str], int]:
        port = free_port()
        auth = mariadb.user + (f":{mariadb.password}" if mariadb.password else "")
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter", "--listen-address", f"127.0.0.1:{port}", *args],
            env={
                **os.environ,
                "AS_EXPORTER_DSN": f"mysql://{auth}@{mariadb.host}:{mariadb.port}/{database}",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        if wait_until(lambda: port_open(port), 20):
            return process, port
        raise RuntimeError(process.communicate(timeout=5))

    yield run
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=10)


def get(
    url: str, context: ssl.SSLContext | None, user: str | None = None, password: str | None = None
) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read().decode(),
            )
    except urllib.error.HTTPError as error:
        return (error.code, {k.lower(): v for k, v in error.headers.items()}, error.read().decode())


def test_tls_and_basic_auth(
    tmp_path: Path,
    certificates: Certificates,
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    _, port = serve("--web.config.file", str(web_config(tmp_path, certificates)))
    trusted = ssl.create_default_context(cafile=str(certificates.ca))
    url = f"https://127.0.0.1:{port}"

    status, headers, body = get(f"{url}/metrics", trusted, "prometheus", PASSWORD)
    assert status == 200 and "actionscheduler_up" in body
    assert headers["x-content-type-options"] == "nosniff"
    assert get(f"{url}/metrics", trusted, "prometheus", "wrong")[0] == 401
    assert get(f"{url}/metrics", trusted, "someone", PASSWORD)[0] == 401
    status, headers, _ = get(f"{url}/metrics", trusted)
    assert status == 401 and headers["www-authenticate"].startswith("Basic")
    assert get(f"{url}/", trusted)[0] == 401
    assert get(f"{url}/healthz", trusted)[0] == 200  # for liveness probes
    # A client that does not trust the CA is refused, and so is plain HTTP.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        get(f"{url}/metrics", ssl.create_default_context())
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        get(f"http://127.0.0.1:{port}/metrics", None)


def test_client_certificates(
    tmp_path: Path,
    certificates: Certificates,
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    _, port = serve("--web.config.file", str(web_config(tmp_path, certificates, client_auth=True)))
    url = f"https://127.0.0.1:{port}/metrics"
    without = ssl.create_default_context(cafile=str(certificates.ca))
    with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
        get(url, without, "prometheus", PASSWORD)
    with_cert = ssl.create_default_context(cafile=str(certificates.ca))
    with_cert.load_cert_chain(str(certificates.client_cert), str(certificates.client_key))
    assert get(url, with_cert, "prometheus", PASSWORD)[0] == 200


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("tls_server_config: {cert_file: x.crt}", "tls_server_config.key_file", "is missing"),
        ("basic_auth_users: {p: plaintext}", "basic_auth_users.p", "bcrypt hash"),
        (
            "tls_server_config: {cert_file: /nonexistent.crt, key_file: /nonexistent.key}",
            "tls_server_config.cert_file",
            "does not exist",
        ),
        ("basic_auth: {}", "basic_auth", "not a known key"),
    ],
)
def test_invalid_web_config(tmp_path: Path, text: str, key: str, problem: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_web_config(str(path))
    assert raised.value.key == key and problem in raised.value.problem
    done = subprocess.run(
        [sys.executable, "-m", "exporter", "--web.config.file", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "AS_EXPORTER_DSN": "mysql://h/d"},
    )
    assert done.returncode == 2
    assert f"{path}: {key}" in done.stderr


def test_sigterm_stops_the_server_within_a_second(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    process, port = serve()
    assert get(f"http://127.0.0.1:{port}/metrics", None)[0] == 200
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=10)
    assert time.monotonic() - sent < 1.0


@pytest.fixture(scope="module")
def tls_mariadb(certificates: Certificates) -> Iterator[Server]:
    """A MariaDB of the test's own that takes TLS connections only."""

    def start(folder: Path) -> Server:
        return start_private(
            folder,
            extra_arguments=[
                f"--ssl-ca={certificates.ca}",
                f"--ssl-cert={certificates.server_cert}",
                f"--ssl-key={certificates.server_key}",
                "--require-secure-transport=ON",
            ],
            connect_options={"ssl": {"ca": str(certificates.ca)}},
        )

    with temporary(start) as server:
        connection = server.connect(ssl={"ca": str(certificates.ca)})
        with connection.cursor() as cursor:
            cursor.execute("CREATE DATABASE shop")
        ActionSchedulerStore(
            server.connect("shop", ssl={"ca": str(certificates.ca)})
        ).create_tables()
        yield server


def test_database_tls_with_verification(
    tls_mariadb: Server, certificates: Certificates, scrape: Scrape, tmp_path: Path
) -> None:
    def shop(tls: TLSConfig | None = None) -> SiteConfig:
        return SiteConfig(
            name="shop",
            host="127.0.0.1",
            port=tls_mariadb.port,
            database="shop",
            query_timeout=3.0,
            tls=tls or TLSConfig(),
        )

    (verified,) = scrape(shop(TLSConfig(ca_file=str(certificates.ca))))
    assert verified.up, verified.problems

    other = make_certificates(tmp_path / "other", "other")
    (wrong_ca,) = scrape(shop(TLSConfig(ca_file=str(other.ca))))
    assert not wrong_ca.up
    assert "certificate verify failed" in wrong_ca.problems[0].lower()

    # Verification is on unless turned off explicitly.
    (unverified,) = scrape(shop(TLSConfig(ca_file=str(other.ca), verify=False)))
    assert unverified.up


def test_a_user_that_can_write_is_reported(
    scrape: Scrape,
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
    mariadb: Server,
    database: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        (as_root,) = scrape(site())
    assert as_root.value("actionscheduler_exporter_database_user_can_write") == 1
    assert "the database user may write" in caplog.text

    admin = mariadb.connect()
    with admin.cursor() as cursor:
        cursor.execute("CREATE USER 'as_reader'@'%' IDENTIFIED BY 'reader-pw'")
        for table in ("actions", "claims", "groups", "logs"):
            cursor.execute(
                f"GRANT SELECT ON {database}.wp_actionscheduler_{table} TO 'as_reader'@'%'"
            )
    try:
        (reader,) = scrape(site(user="as_reader", password="reader-pw"))
        assert reader.up
        assert reader.value("actionscheduler_exporter_database_user_can_write") == 0
    finally:
        with admin.cursor() as cursor:
            cursor.execute("DROP USER 'as_reader'@'%'")
        admin.close()


def test_grant_parsing() -> None:
    assert can_write(["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"], "shop")
    assert can_write(["GRANT SELECT, INSERT ON `shop`.* TO `e`@`%`"], "shop")
    assert can_write(
        ["GRANT UPDATE (status) ON `shop`.`wp_actionscheduler_actions` TO `e`@`%`"], "shop"
    )
    assert can_write(["GRANT DELETE ON `sh\\_%`.* TO `e`@`%`"], "sh_op")
    assert not can_write(
        [
            "GRANT USAGE ON *.* TO `e`@`%`",
            "GRANT SELECT ON `shop`.`wp_actionscheduler_actions` TO `e`@`%`",
            "GRANT INSERT ON `other`.* TO `e`@`%`",
        ],
        "shop",
    )
    assert not can_write(["GRANT `reporting` TO `e`@`%`"], "shop")
