"""The heavy tier on a read replica: real MariaDB replication (a primary with a binary log
and a replica of it, both private servers), its lag exported, and the documented fallback
when the replica is down, stopped or too far behind."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pymysql
import pytest

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.config.model import ReplicaConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator
from testbed.mariadb import Server, start_private, temporary
from testbed.proxy import SlowProxy
from testbed.store import ActionSchedulerStore
from tests.support.waiting import wait_until

DATABASE = "replicated_shop"
INTERVAL = 0.2  # heavy_interval: a refresh at almost every scrape


def _start_primary(workdir: Path) -> Server:
    return start_private(workdir, extra_arguments=["--server-id=1", "--log-bin=primary-bin"])


def _start_replica(workdir: Path) -> Server:
    return start_private(workdir, extra_arguments=["--server-id=2", "--read-only=1"])


def _replicate(replica: Server, primary: Server, delay: int = 0) -> None:
    with replica.connect() as connection, connection.cursor() as cursor:
        cursor.execute("STOP SLAVE")
        cursor.execute(
            "CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USER = 'root',"
            " MASTER_PASSWORD = '', MASTER_USE_GTID = slave_pos, MASTER_DELAY = %s",
            (primary.host, primary.port, delay),
        )
        cursor.execute("START SLAVE")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Server, Server]]:
    with temporary(_start_primary) as primary, temporary(_start_replica) as replica:
        with primary.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {DATABASE}")
        _replicate(replica, primary)
        yield primary, replica


@pytest.fixture
def store(servers: tuple[Server, Server]) -> Iterator[ActionSchedulerStore]:
    primary, replica = servers
    _replicate(replica, primary)
    connection = primary.connect(DATABASE)
    store = ActionSchedulerStore(connection, "wp_")
    store.drop_tables()
    store.create_tables()
    for index in range(30):
        action_id = store.create(
            "woocommerce_deliver_webhook_async", group="webhooks", args=[index]
        )
        store.start(action_id)
        if index % 3:
            store.complete(action_id)
        else:
            store.fail(action_id, "Supplier API unreachable")
    assert wait_until(lambda: _caught_up(servers), 30)
    yield store
    connection.close()


def _caught_up(servers: tuple[Server, Server]) -> bool:
    counts = []
    for server in servers:
        with server.connect() as connection, connection.cursor() as cursor:
            try:
                cursor.execute(f"SELECT COUNT(*) FROM {DATABASE}.wp_actionscheduler_actions")
            except pymysql.err.ProgrammingError:  # the table is not there yet on the replica
                return False
            counts.append(int(cursor.fetchone()[0]))
    return counts[0] == counts[1]


def _site(primary: Server, replica_port: int, **replica: object) -> SiteConfig:
    return SiteConfig(
        name="shop",
        host=primary.host,
        port=primary.port,
        user=primary.user,
        database=DATABASE,
        heavy_interval=INTERVAL,
        heavy_chunk_rows=10,
        replica=ReplicaConfig(host=primary.host, port=replica_port, user="root", **replica),  # type: ignore[arg-type]
    )


@contextlib.contextmanager
def exporter(site: SiteConfig) -> Iterator[Callable[[], SiteResult]]:
    coordinator = Coordinator(ExporterConfig(sites=(site,)))

    def scrape() -> SiteResult:
        (result,) = coordinator.scrape(10.0)
        return result

    try:
        yield scrape
    finally:
        coordinator.close()


def _failed(result: SiteResult) -> float | None:
    return result.value(catalog.ACTIONS.name, status="failed")


def test_the_totals_are_read_on_the_replica_with_its_lag(
    servers: tuple[Server, Server], store: ActionSchedulerStore
) -> None:
    primary, replica = servers
    proxy = SlowProxy(replica.host, replica.port, delay=0.0)  # counts what reaches the replica
    try:
        with exporter(_site(primary, proxy.port)) as scrape:
            result = scrape()
            assert result.value(catalog.REPLICA_USED.name) == 1.0, result.problems
            assert result.value(catalog.REPLICA_LAG.name) == 0.0
            assert (
                _failed(result) == 10
                and result.value(catalog.ACTIONS.name, status="complete") == 20
            )
            assert proxy.queries > 0  # the walk went to the replica
            assert result.value(catalog.DATABASE_SECONDS.name, tier="heavy")

            store.fail(store.create("late_hook"), "boom")  # replicated within moments
            assert wait_until(lambda: _failed(scrape()) == 11, 20)
    finally:
        proxy.close()


def test_a_replica_that_is_down_falls_back_to_the_primary(
    servers: tuple[Server, Server], store: ActionSchedulerStore
) -> None:
    primary, replica = servers
    proxy = SlowProxy(replica.host, replica.port, delay=0.0)
    with exporter(_site(primary, proxy.port)) as scrape:
        assert scrape().value(catalog.REPLICA_USED.name) == 1.0
        proxy.close()  # the replica cannot be reached any more
        store.fail(store.create("late_hook"), "boom")

        def fell_back() -> bool:
            result = scrape()
            return result.value(catalog.REPLICA_USED.name) == 0.0 and _failed(result) == 11

        assert wait_until(fell_back, 20)
        result = scrape()
        assert result.value(catalog.COLLECTOR_SUCCESS.name, collector="status") == 1.0
        assert result.value(catalog.REPLICA_LAG.name) is None
        assert any("read from the primary" in problem for problem in result.problems)
        assert result.value(catalog.ERRORS.name, kind="connect")


def test_without_fallback_a_down_replica_keeps_the_last_totals(
    servers: tuple[Server, Server], store: ActionSchedulerStore
) -> None:
    primary, replica = servers
    proxy = SlowProxy(replica.host, replica.port, delay=0.0)
    with exporter(_site(primary, proxy.port, fallback="none")) as scrape:
        assert _failed(scrape()) == 10
        proxy.close()

        def failing() -> bool:
            result = scrape()
            return result.value(catalog.COLLECTOR_SUCCESS.name, collector="status") == 0.0

        assert wait_until(failing, 20)
        store.fail(store.create("late_hook"), "boom")  # on the primary: not read
        errors = scrape().value(catalog.ERRORS.name, kind="connect") or 0
        assert wait_until(
            lambda: (scrape().value(catalog.ERRORS.name, kind="connect") or 0) > errors, 20
        )
        result = scrape()
        assert _failed(result) == 10  # the last totals, marked as failed
        assert result.value(catalog.REPLICA_USED.name) == 0.0
        assert any(problem.startswith("replica:") for problem in result.problems)


def test_a_replica_too_far_behind_is_not_trusted(
    servers: tuple[Server, Server], store: ActionSchedulerStore
) -> None:
    """A replica that applies events an hour late (MASTER_DELAY) lags as soon as the
    primary writes: above max_lag, the totals come from the primary."""
    primary, replica = servers
    with exporter(_site(primary, replica.port, max_lag=2.0)) as scrape:
        assert scrape().value(catalog.REPLICA_USED.name) == 1.0
        _replicate(replica, primary, delay=3600)
        store.fail(store.create("late_hook"), "boom")

        def behind() -> bool:
            result = scrape()
            lag = result.value(catalog.REPLICA_LAG.name)
            return (
                lag is not None
                and lag > 2
                and result.value(catalog.REPLICA_USED.name) == 0.0
                and _failed(result) == 11
            )

        assert wait_until(behind, 30)


def test_a_replica_whose_replication_stopped_is_not_trusted(
    servers: tuple[Server, Server], store: ActionSchedulerStore
) -> None:
    primary, replica = servers
    with replica.connect() as connection, connection.cursor() as cursor:
        cursor.execute("STOP SLAVE SQL_THREAD")
    with exporter(_site(primary, replica.port)) as scrape:
        result = scrape()
        assert result.value(catalog.REPLICA_USED.name) == 0.0
        assert any("replication is stopped" in problem for problem in result.problems)
        assert _failed(result) == 10  # from the primary
