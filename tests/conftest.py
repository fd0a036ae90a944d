"""Fixtures: a real MariaDB, a fresh database per test, the Action Scheduler writer, and
the exporter run against them (in-process, or over real HTTP)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.logs import JsonFormatter, LogfmtFormatter
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator
from testbed.mariadb import Server, ensure_server, start_private, temporary
from testbed.proxy import SlowProxy
from testbed.store import ActionSchedulerStore
from tests.support import logfmt
from tests.support.end_to_end import EndToEnd
from tests.support.fake_kubernetes import FakeKubernetes, pod
from tests.support.follower import Follow, following
from tests.support.http_server import RunningExporter


@pytest.fixture(autouse=True)
def log_lines_parse(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every line a test makes the exporter log is one that a strict logfmt parser and
    `json.loads` read, with each field a key of its own (caplog shows them as logfmt)."""
    caplog.handler.setFormatter(LogfmtFormatter())
    yield
    as_json = JsonFormatter()
    for record in caplog.records:
        if not record.name.startswith("actionscheduler_exporter"):
            continue
        fields = logfmt.parse(LogfmtFormatter().format(record))
        entry = json.loads(as_json.format(record))
        assert fields["msg"] == entry["msg"] == record.getMessage()
        assert set(fields) == set(entry)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[Server]:
    with temporary(ensure_server) as server:
        yield server


@pytest.fixture
def database(mariadb: Server) -> Iterator[str]:
    name = f"as_test_{secrets.token_hex(4)}"
    admin = mariadb.connect()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    try:
        yield name
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


@pytest.fixture
def connect(
    mariadb: Server, database: str
) -> Iterator[Callable[[], pymysql.connections.Connection[Any]]]:
    opened: list[pymysql.connections.Connection[Any]] = []

    def open_connection() -> pymysql.connections.Connection[Any]:
        connection = mariadb.connect(database)
        opened.append(connection)
        return connection

    yield open_connection
    for connection in opened:
        connection.close()


@pytest.fixture
def store_factory(
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> Callable[[str], ActionSchedulerStore]:
    def make(prefix: str = "wp_") -> ActionSchedulerStore:
        store = ActionSchedulerStore(connect(), prefix)
        store.create_tables()
        return store

    return make


@pytest.fixture
def store(store_factory: Callable[[str], ActionSchedulerStore]) -> ActionSchedulerStore:
    return store_factory("wp_")


SiteFactory = Callable[..., SiteConfig]


@pytest.fixture
def site(mariadb: Server, database: str) -> SiteFactory:
    def make(**overrides: Any) -> SiteConfig:
        fields: dict[str, Any] = {
            "name": "shop",
            "host": mariadb.host,
            "port": mariadb.port,
            "user": mariadb.user,
            "password": mariadb.password,
            "database": database,
            "query_timeout": 5.0,
        }
        fields.update(overrides)
        return SiteConfig(**fields)

    return make


Scrape = Callable[..., list[SiteResult]]


@pytest.fixture
def scrape(site: SiteFactory) -> Iterator[Scrape]:
    """Runs one scrape for the given sites (default: the `shop` site) and returns results."""
    coordinators: list[Coordinator] = []

    def run(*sites: SiteConfig, timeout: float = 10.0) -> list[SiteResult]:
        coordinator = Coordinator(ExporterConfig(sites=sites or (site(),)))
        coordinators.append(coordinator)
        return coordinator.scrape(timeout)

    yield run
    for coordinator in coordinators:
        coordinator.close()


@pytest.fixture
def exporter_http(site: SiteFactory) -> Iterator[Callable[..., RunningExporter]]:
    started: list[RunningExporter] = []

    def start(*sites: SiteConfig) -> RunningExporter:
        running = RunningExporter(ExporterConfig(sites=sites or (site(),)))
        running.start()
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FakeKubernetes]:
    fake = FakeKubernetes(tmp_path)
    fake.pods = [
        pod("shop-worker-5d9f7c6b8-aaaaa", restarts=0),
        pod("shop-worker-5d9f7c6b8-bbbbb", restarts=2, last_reason="OOMKilled"),
        pod(
            "shop-worker-5d9f7c6b8-ccccc",
            ready=False,
            restarts=7,
            waiting="CrashLoopBackOff",
            last_reason="Error",
        ),
    ]
    yield fake
    fake.stop()


@pytest.fixture
def proxy(mariadb: Server) -> Iterator[SlowProxy]:
    """A proxy in front of the MariaDB that counts the statements sent through it (the
    exporter's own, whoever else uses the server)."""
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0)
    yield proxy
    proxy.close()


@pytest.fixture
def private_server() -> Iterator[Server]:
    """A MariaDB of this test's own, which it may stop and start again."""
    with temporary(start_private) as server:
        yield server


@pytest.fixture
def follow(site: SiteFactory) -> Iterator[Follow]:
    """Exporters kept across scrapes: `follow(**site_overrides)`."""
    yield from following(site)


@pytest.fixture
def end_to_end(
    mariadb: Server,
    database: str,
    store_factory: Callable[[str], ActionSchedulerStore],
    site: SiteFactory,
    exporter_http: Callable[..., RunningExporter],
    tmp_path: Path,
) -> EndToEnd:
    """The end-to-end tests' one fixture: stores, sites, the exporter over HTTP and the
    alerting stack of the test's database."""
    return EndToEnd(mariadb, database, store_factory, site, exporter_http, tmp_path)
