"""Secure by default: TLS and basic auth on the exporter's endpoint (exporter-toolkit's web
configuration, real TLS clients), TLS to the database with verification, a warning for a
database user that could write, and no secret anywhere."""

from __future__ import annotations

import base64
import contextlib
import http.client
import logging
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import pytest

from actionscheduler_exporter.config import ConfigError, ExporterConfig, SiteConfig
from actionscheduler_exporter.config.model import TLSConfig
from actionscheduler_exporter.db import session
from actionscheduler_exporter.db.grants import can_write
from actionscheduler_exporter.db.query_error import redact
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.web.auth import BasicAuth
from actionscheduler_exporter.web.webconfig import load_web_config
from testbed.certs import Certificates, make_certificates
from testbed.mariadb import Server, start_private, temporary
from testbed.ports import free_port
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.support.locks import lock_tables, lock_waits
from tests.support.waiting import port_open, wait_until

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
            [
                sys.executable,
                "-m",
                "actionscheduler_exporter",
                "--listen-address",
                f"127.0.0.1:{port}",
                *args,
            ],
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
        # Issue 25, item 5: a hash of the right length with a bad cost or salt.
        (f"basic_auth_users: {{p: '$2y$ab${'a' * 53}'}}", "basic_auth_users.p", "cost of 04"),
        (f"basic_auth_users: {{p: '$2y$99${'a' * 53}'}}", "basic_auth_users.p", "cost of 04"),
        (
            'http_server_config: {headers: {"X-A\\nB": v}}',  # a line break in the name
            "http_server_config.headers.'X-A\\nB'",
            "not a valid header name",
        ),
        (
            "http_server_config: {headers: {X-Shop: '€'}}",
            "http_server_config.headers.'X-Shop'",
            "visible ASCII",
        ),
        (
            "tls_server_config: {cert_file: /nonexistent.crt, key_file: /nonexistent.key}",
            "tls_server_config.cert_file",
            "does not exist",
        ),
        ("basic_auth: {}", "basic_auth", "not a known key"),
        ("tls_server_config: [", "", "not valid YAML at line"),
    ],
)
def test_invalid_web_config(tmp_path: Path, text: str, key: str, problem: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_web_config(str(path))
    assert raised.value.key == key and problem in raised.value.problem
    done = subprocess.run(
        [sys.executable, "-m", "actionscheduler_exporter", "--web.config.file", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "AS_EXPORTER_DSN": "mysql://u@h/d"},
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
    session._WARNED.clear()  # warned once per server and user: not by an earlier test
    with caplog.at_level(logging.WARNING):
        (as_root,) = scrape(site())
    assert as_root.value("actionscheduler_exporter_database_user_can_write") == 1
    assert "the database user may write" in caplog.text

    admin = mariadb.connect()
    user = f"as_reader_{secrets.token_hex(3)}"  # another test run may share the server
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'reader-pw'")
        for table in ("actions", "claims", "groups", "logs"):
            cursor.execute(f"GRANT SELECT ON {database}.wp_actionscheduler_{table} TO '{user}'@'%'")
    try:
        (reader,) = scrape(site(user=user, password="reader-pw"))
        assert reader.up
        assert reader.value("actionscheduler_exporter_database_user_can_write") == 0
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP USER '{user}'@'%'")
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


def test_web_tls_settings_that_cannot_work_are_refused(
    tmp_path: Path, certificates: Certificates
) -> None:
    """Issue 13, items 11 and 12: a client-certificate mode without a CA refused every
    client silently; a key that does not match its certificate died in a traceback."""
    without_ca = tmp_path / "without-ca.yml"
    without_ca.write_text(
        f"tls_server_config:\n  cert_file: {certificates.server_cert}\n"
        f"  key_file: {certificates.server_key}\n  client_auth_type: RequireAnyClientCert\n"
    )
    with pytest.raises(ConfigError, match="needed with client_auth_type RequireAnyClientCert"):
        load_web_config(str(without_ca))
    mismatched = tmp_path / "mismatched.yml"
    mismatched.write_text(
        f"tls_server_config:\n  cert_file: {certificates.server_cert}\n"
        f"  key_file: {certificates.client_key}\n"
    )
    with pytest.raises(ConfigError, match="does not go with cert_file") as raised:
        load_web_config(str(mismatched))
    assert raised.value.key == "tls_server_config.key_file"


def test_the_yaml_error_of_a_web_config_does_not_quote_the_hash(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prometheus: '{hashed}\n")
    with pytest.raises(ConfigError) as raised:
        load_web_config(str(path))
    assert hashed not in str(raised.value)


def test_redaction_keeps_messages_readable_for_short_passwords() -> None:
    """Issue 13, item 9: a password "e" or "127" starred letters of words and addresses."""
    message = "(1045) Access denied for user 'shop'@'127.0.0.1' (using password: YES)"
    assert redact(message, "e") == message
    assert redact(message, "127") == message
    withheld = "the server's message is withheld: it contains the password"
    assert redact("(1045) wrong password 'Zq7p@ss:w/o'", "Zq7p@ss:w/o") == f"(1045) {withheld}"
    assert redact("secret and secret", "secret") == withheld
    # Issue 25, item 4: starring a word told it (a password "denied", or the user's name).
    assert redact(message, "denied") == f"(1045) {withheld}"
    assert redact(message, "shop") == f"(1045) {withheld}"


def test_basic_auth_answers_long_passwords_and_unknown_users_like_wrong_ones() -> None:
    """Issue 13, items 15 and 17: a password over 72 bytes raised in bcrypt (a 500); an
    unknown user was checked against a hash of another cost than the users'."""
    cost = 5
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=cost))
    auth = BasicAuth({"prometheus": hashed})

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    assert auth.allows(header("prometheus", PASSWORD))
    assert not auth.allows(header("prometheus", "x" * 100))
    assert not auth.allows(header("nobody", "x" * 100))
    assert not auth.allows(header("nobody", PASSWORD))
    # The unknown user's check costs what a user's does: the same bcrypt cost.
    assert int(auth._dummy[4:6]) == cost
    # Issue 25, item 5: the scheme in any case, as Go reads it; a header that is not ASCII
    # base64 is a refusal, not a 500.
    assert auth.allows(header("prometheus", PASSWORD).replace("Basic", "basic"))
    assert not auth.allows("Basic \xe9\xe9")
    assert not auth.allows("Basic")


def test_a_flood_of_wrong_passwords_does_not_hold_up_a_known_scraper(
    tmp_path: Path,
    certificates: Certificates,
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    """Issue 13, item 5: wrong passwords (bcrypt, slow on purpose) and the scraper's
    remembered credentials shared one thread pool. Now a remembered pair needs no thread,
    and checks beyond the auth threads' queue are refused at once."""
    _, port = serve("--web.config.file", str(web_config(tmp_path, certificates)))
    url = f"https://127.0.0.1:{port}/metrics"
    context = ssl.create_default_context(cafile=str(certificates.ca))
    assert get(url, context, "prometheus", PASSWORD)[0] == 200  # now remembered
    stop = threading.Event()
    refused: list[int] = []

    def attack() -> None:
        while not stop.is_set():
            try:
                refused.append(get(url, context, "prometheus", "wrong")[0])
            except (urllib.error.URLError, ConnectionError, OSError):
                refused.append(0)

    attackers = [threading.Thread(target=attack) for _ in range(60)]
    for thread in attackers:
        thread.start()
    try:
        assert wait_until(lambda: 429 in refused, 30)  # the auth queue is full
        answers = [get(url, context, "prometheus", PASSWORD)[0] for _ in range(5)]
    finally:
        stop.set()
        for thread in attackers:
            thread.join()
    assert answers == [200] * 5
    assert set(refused) <= {401, 429}


def test_slow_clients_are_closed_and_connections_are_bounded(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    """Issue 13, item 3 (slowloris): connections that send half a request line held the
    exporter at its file-descriptor limit, and nothing was closed after 75 s."""
    _, port = serve("--web.header-timeout", "1", "--web.max-connections", "20")
    slow: list[socket.socket] = []
    try:
        for _ in range(30):
            connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            connection.sendall(b"GET /metr")
            slow.append(connection)

        # Beyond the bound at once, the others after the header timeout: all are closed.
        assert wait_until(lambda: all(closed(c) for c in slow), 20, interval=0.2)
        # A scraper then gets its answer.
        assert get(f"http://127.0.0.1:{port}/metrics", None)[0] == 200
    finally:
        for connection in slow:
            connection.close()


def test_a_request_in_several_packets_within_the_timeout_is_served(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    _, port = serve("--web.header-timeout", "5")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\n")
        connection.sendall(b"Host: 127.0.0.1\r\n\r\n")
        assert connection.recv(1024).startswith(b"HTTP/1.1 200")


def send_endless_headers(connection: socket.socket) -> None:
    """Header lines of about 230 kB in all, or until the exporter closes the connection."""
    with contextlib.suppress(OSError):  # reset once it closes mid-send
        for index in range(2_000):
            connection.sendall(b"X-Filler-%d: %s\r\n" % (index, b"a" * 100))


def read_until_closed(
    connection: socket.socket, until: Callable[[bytes], bool] = lambda _: False
) -> bytes:
    """What the exporter sends until it closes the connection (or `until` what came)."""
    answer = b""
    with contextlib.suppress(OSError):
        while chunk := connection.recv(65536):
            answer += chunk
            if until(answer):
                break
    return answer


@contextlib.contextmanager
def scrape_held_by_a_lock(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
    mariadb: Server,
    database: str,
    header_timeout: str,
    pipelined: bytes,
) -> Iterator[socket.socket]:
    """A connection that sent `pipelined`, a scrape among its requests, once the scrape
    waits for a table locked meanwhile; the lock ends with the block."""
    locker = mariadb.connect(database)
    lock_tables(locker, ["wp_actionscheduler_claims"])
    _, port = serve("--web.header-timeout", header_timeout)
    observer = mariadb.connect()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            connection.sendall(pipelined)
            assert wait_until(lambda: lock_waits(observer, database) >= 1, 20)
            yield connection
    finally:
        locker.close()
        observer.close()


def test_endless_headers_are_refused_and_the_exporter_serves_on(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    """httptools sets no bound on a request's headers: the guard refuses more than h11
    would (16 KiB) with a 431 and closes, instead of holding them in memory."""
    _, port = serve("--web.header-timeout", "30")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        send_endless_headers(connection)
        answer = read_until_closed(connection)
        assert answer.startswith(b"HTTP/1.1 431 ")
        assert answer.endswith(b"Request header fields too large\n")
    # A scraper's request of a few hundred bytes, and one near the bound, are served.
    near = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        near.request("GET", "/healthz", headers={f"X-Filler-{i}": "a" * 100 for i in range(120)})
        assert near.getresponse().read() == b"ok\n"
    finally:
        near.close()
    assert get(f"http://127.0.0.1:{port}/metrics", None)[0] == 200


def test_endless_headers_behind_a_scrape_under_way_close_the_connection(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
    mariadb: Server,
    database: str,
) -> None:
    """The bound holds for a request pipelined behind one being answered (a scrape held by
    a locked table here): the connection is closed at once, not read without end until
    the scrape's answer."""
    pipelined = (
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"X-Prometheus-Scrape-Timeout-Seconds: 20\r\n\r\n"
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    )
    with scrape_held_by_a_lock(serve, mariadb, database, "30", pipelined) as connection:
        send_endless_headers(connection)
        answer = read_until_closed(connection)
    # Closed while the scrape waited for the lock: neither its answer nor a 431 came.
    assert b"HTTP/1.1" not in answer


def test_a_kept_alive_connection_idle_after_its_answer_is_closed_on_time(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    """The header timer is armed once per connection and looks again when it fires: a
    connection that was answered and then sends half a request is closed once that wait
    passes the timeout, while one that keeps asking in time stays open past it."""
    _, port = serve("--web.header-timeout", "2")
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    busy = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for connection in (idle, busy):
            connection.request("GET", "/healthz")
            assert connection.getresponse().read() == b"ok\n"
        assert idle.sock is not None
        idle.sock.sendall(b"GET /heal")
        started = time.monotonic()
        idle_closed_at: float | None = None
        # Asking every 50 ms, until one more timeout has passed after the idle one closed.
        while idle_closed_at is None or time.monotonic() < idle_closed_at + 3:
            busy.request("GET", "/healthz")
            assert busy.getresponse().read() == b"ok\n"
            if idle_closed_at is None and closed(idle.sock):
                idle_closed_at = time.monotonic()
            assert time.monotonic() - started < 60, "the idle connection was never closed"
            threading.Event().wait(0.05)
    finally:
        idle.close()
        busy.close()


def test_a_pipelined_scrape_is_answered_past_the_header_timeout(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
    mariadb: Server,
    database: str,
) -> None:
    """A request read while the one before it was answered is under way once that answer
    ends: no wait for headers starts then, however long it takes (a scrape held by a
    locked table here, past a header timeout of a second)."""
    pipelined = (
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"X-Prometheus-Scrape-Timeout-Seconds: 6\r\n\r\n"
    )
    with scrape_held_by_a_lock(serve, mariadb, database, "1", pipelined) as connection:
        started = time.monotonic()
        answer = read_until_closed(
            connection,
            until=lambda got: got.count(b"HTTP/1.1 200") == 2 and b"actionscheduler_up" in got,
        )
    assert time.monotonic() - started > 1, "the scrape did not wait past the header timeout"
    assert answer.count(b"HTTP/1.1 200") == 2 and b"actionscheduler_up" in answer


def test_sighup_reloads_the_configuration_and_keeps_it_when_the_new_one_is_wrong(
    tmp_path: Path, mariadb: Server, database: str, store: ActionSchedulerStore
) -> None:
    """Issue 25, item 8: SIGHUP killed the exporter (exit 129). Now it reads the files
    again: a new site is served, a new password works; a wrong file is logged and the
    running configuration kept, as exporter-toolkit does."""
    site = (
        f"{{name: %s, host: {mariadb.host}, port: {mariadb.port}, user: {mariadb.user},"
        f" password: '{mariadb.password}', database: {database}}}"
    )
    config = tmp_path / "exporter.yml"
    config.write_text(f"sites:\n  - {site % 'shop'}\n")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users: {{prometheus: '{hashed}'}}\n")
    log = tmp_path / "exporter.log"
    port = free_port()
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "actionscheduler_exporter", "--config", str(config),
             "--web.config.file", str(web), "--listen-address", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=stderr, text=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert wait_until(lambda: port_open(port), 20)
        assert 'site="shop"' in get(url, None, "prometheus", PASSWORD)[2]

        config.write_text(f"sites:\n  - {site % 'shop'}\n  - {site % 'blog'}\n")
        new_hash = bcrypt.hashpw(b"rotated-pw", bcrypt.gensalt(rounds=4)).decode()
        web.write_text(f"basic_auth_users: {{prometheus: '{new_hash}'}}\n")
        process.send_signal(signal.SIGHUP)
        assert wait_until(
            lambda: 'site="blog"' in get(url, None, "prometheus", "rotated-pw")[2], 20
        )
        assert get(url, None, "prometheus", PASSWORD)[0] == 401

        config.write_text("sites: [")  # broken: the running configuration stays
        process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "reload failed" in log.read_text(), 20)
        status, _, body = get(url, None, "prometheus", "rotated-pw")
        assert status == 200 and 'site="blog"' in body
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
    assert process.returncode == 0


def test_sigterm_answers_the_scrape_in_flight_before_stopping(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
    mariadb: Server,
    database: str,
) -> None:
    """Issue 25, item 8: a SIGTERM during a scrape gave that request a 500 and a
    traceback; now the scrape in flight is answered, then the process exits 0."""
    locker = mariadb.connect(database)
    lock_tables(locker, ["wp_actionscheduler_claims"])
    process, port = serve()
    answers: list[int] = []
    scrape = threading.Thread(
        target=lambda: answers.append(get(f"http://127.0.0.1:{port}/metrics", None)[0])
    )
    observer = mariadb.connect()
    try:
        scrape.start()
        assert wait_until(lambda: lock_waits(observer, database) >= 1, 20)
        # The lock stays: the round goes on for seconds (the lock waits, then the rest).
        process.send_signal(signal.SIGTERM)
        scrape.join(30)
        _, stderr = process.communicate(timeout=30)
    finally:
        locker.close()  # ends the lock
        observer.close()
    assert answers == [200]
    assert process.returncode == 0 and "Traceback" not in stderr


def test_a_flood_of_idle_connections_at_the_cap_does_not_lock_scrapers_out(
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    """Issue 25, item 3: a client holding connections with `GET /metr` and reopening what
    is closed got 1 of 27 real scrapes through and 800 warnings a second. At the cap the
    connection waiting longest for its headers gives way; the warning is rate-limited."""
    process, port = serve("--web.max-connections", "40", "--web.header-timeout", "30")
    stop = threading.Event()
    held: list[socket.socket] = []

    def flood() -> None:
        while not stop.is_set():
            for connection in [c for c in held if closed(c)]:
                held.remove(connection)
                connection.close()
            while len(held) < 60 and not stop.is_set():
                with contextlib.suppress(OSError):
                    connection = socket.create_connection(("127.0.0.1", port), timeout=5)
                    connection.sendall(b"GET /metr")
                    held.append(connection)
            stop.wait(0.01)

    flooder = threading.Thread(target=flood)
    flooder.start()
    try:
        assert wait_until(lambda: len(held) >= 60, 20)
        answers = [get(f"http://127.0.0.1:{port}/metrics", None)[0] for _ in range(10)]
    finally:
        stop.set()
        flooder.join(30)
        for connection in held:
            connection.close()
    assert answers == [200] * 10
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    warnings = [line for line in stderr.splitlines() if "--web.max-connections" in line]
    assert 1 <= len(warnings) <= 10, len(warnings)


def closed(connection: socket.socket) -> bool:
    """Whether the other end has closed the connection (without waiting for long)."""
    connection.settimeout(0.01)
    try:
        return connection.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_tls_handshakes_count_against_the_limits(
    tmp_path: Path,
    certificates: Certificates,
    serve: Callable[..., tuple[subprocess.Popen[str], int]],
) -> None:
    """Issue 25, item 2: with TLS, connections that never send a ClientHello held a file
    descriptor each for 60 s (asyncio's handshake timeout) and none counted against
    --web.max-connections. Now the handshake runs under the header timeout and counts."""
    process, port = serve(
        "--web.config.file", str(web_config(tmp_path, certificates)),
        "--web.max-connections", "40", "--web.header-timeout", "2",
    )  # fmt: skip
    trusted = ssl.create_default_context(cafile=str(certificates.ca))
    url = f"https://127.0.0.1:{port}/metrics"
    silent: list[socket.socket] = []
    try:
        for _ in range(100):
            silent.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        # Bounded at once: the exporter holds about as many sockets as the limit.
        assert wait_until(lambda: open_sockets(process.pid) <= 40 + 5, 10)
        assert get(url, trusted, "prometheus", PASSWORD)[0] == 200
        # And the silent ones are all closed within the header timeout.
        assert wait_until(lambda: all(closed(c) for c in silent), 20, interval=0.2)
    finally:
        for connection in silent:
            connection.close()


def open_sockets(pid: int) -> int:
    """The process's open sockets (its listening one included)."""
    folder = Path(f"/proc/{pid}/fd")
    found = 0
    for entry in folder.iterdir():
        with contextlib.suppress(OSError):
            found += os.readlink(entry).startswith("socket:")
    return found


def test_a_custom_telemetry_path(serve: Callable[..., tuple[subprocess.Popen[str], int]]) -> None:
    """Issue 26, item 6: exporter-toolkit's --web.telemetry-path."""
    _, port = serve("--web.telemetry-path", "/prometheus")
    assert get(f"http://127.0.0.1:{port}/prometheus", None)[0] == 200
    assert get(f"http://127.0.0.1:{port}/metrics", None)[0] == 404
    assert "href='prometheus'" in get(f"http://127.0.0.1:{port}/", None)[2]


def test_the_write_warning_is_logged_once_per_server_and_user(
    scrape: Scrape, site: Callable[..., SiteConfig], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 26, item 6: with `table_prefix: auto` the warning that the database user may
    write repeated at every scrape (the warned-once flag lived on a per-scrape session)."""
    session._WARNED.clear()  # other tests of this process warned about the same user
    network = site(name="net", table_prefix="auto")
    coordinator = Coordinator(ExporterConfig(sites=(network,)))
    try:
        for _ in range(3):
            coordinator.scrape(10.0)
    finally:
        coordinator.close()
    assert caplog.text.count("the database user may write") == 1
