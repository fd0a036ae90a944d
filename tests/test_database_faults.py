"""What production does to the database, against real MariaDB: connections exhausted, a
read-only replica, tables renamed away and back, a server ten times slower, and 200
scrapes at once."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pymysql
import pytest

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.db import read_ahead as read_ahead_module
from actionscheduler_exporter.db.pool import ServerPool
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.read_ahead import ReadAhead
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.sources.database import Collector, DatabaseContext
from testbed.mariadb import Server
from testbed.ports import free_port
from testbed.proxy import SlowProxy
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.support.http_server import RunningExporter
from tests.support.locks import tables_locked
from tests.support.scenarios import assert_matches, backlog
from tests.support.truth import compute
from tests.support.waiting import wait_until


@pytest.fixture
def shop_on_private(private_server: Server) -> Iterator[tuple[Server, ActionSchedulerStore]]:
    admin = private_server.connect()
    with admin.cursor() as cursor:
        cursor.execute("CREATE DATABASE shop")
        cursor.execute("CREATE USER 'exporter'@'%' IDENTIFIED BY 'exporter-pw'")
        cursor.execute("GRANT SELECT ON shop.* TO 'exporter'@'%'")
    store = ActionSchedulerStore(private_server.connect("shop"))
    store.create_tables()
    backlog(store)
    yield private_server, store
    admin.close()


def exporter_site(server: Server, **overrides: object) -> SiteConfig:
    fields: dict[str, object] = {
        "name": "shop",
        "host": server.host,
        "port": server.port,
        "user": "exporter",
        "password": "exporter-pw",
        "database": "shop",
        "query_timeout": 2.0,
    }
    fields.update(overrides)
    return SiteConfig(**fields)  # type: ignore[arg-type]


@contextlib.contextmanager
def server_variable(server: Server, name: str, value: object, restore: object) -> Iterator[None]:
    """A global server variable set for the block, and set back after it."""
    admin = server.connect()
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"SET GLOBAL {name} = %s", (value,))
        yield
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"SET GLOBAL {name} = %s", (restore,))
        admin.close()


def test_max_connections_exhausted_then_freed(
    shop_on_private: tuple[Server, ActionSchedulerStore], scrape: Scrape
) -> None:
    server, _ = shop_on_private
    with server_variable(server, "max_connections", 4, restore=151):
        hogs = []
        refusal: pymysql.err.OperationalError | None = None
        try:
            while refusal is None:  # take every connection a user may have
                try:
                    hogs.append(
                        pymysql.connect(
                            host=server.host,
                            port=server.port,
                            user="exporter",
                            password="exporter-pw",
                            database="shop",
                        )
                    )
                except pymysql.err.OperationalError as error:
                    refusal = error
            assert refusal.args[0] == 1040  # Too many connections
            (refused,) = scrape(exporter_site(server))
            assert not refused.up
            assert "(1040) Too many connections" in refused.problems[0]
        finally:
            for hog in hogs:
                hog.close()
        (recovered,) = scrape(exporter_site(server))
        assert recovered.up


def test_a_read_only_replica_is_read_as_usual(
    shop_on_private: tuple[Server, ActionSchedulerStore], scrape: Scrape
) -> None:
    server, store = shop_on_private
    with server_variable(server, "read_only", "ON", restore="OFF"):
        (result,) = scrape(exporter_site(server))
        assert_matches(result, compute(store.connection))


def test_tables_renamed_away_and_back(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    backlog(store)
    coordinator = Coordinator(ExporterConfig(sites=(site(),)))
    try:
        store._execute("RENAME TABLE wp_actionscheduler_logs TO wp_actionscheduler_logs_old")
        (away,) = coordinator.scrape()
        assert not away.up
        assert away.value("actionscheduler_table_exists", table="logs") == 0
        store._execute("RENAME TABLE wp_actionscheduler_logs_old TO wp_actionscheduler_logs")
        (back,) = coordinator.scrape()
        assert_matches(back, compute(store.connection))
    finally:
        coordinator.close()


def test_a_ten_times_slower_server(
    store: ActionSchedulerStore, mariadb: Server, scrape: Scrape, site: Callable[..., SiteConfig]
) -> None:
    """Every packet delayed: the scrape is slower and still right; with too short a
    deadline the collectors it had no time for are marked, and nothing breaks."""
    backlog(store)
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0.02)
    try:
        started = time.monotonic()
        (slow,) = scrape(site(host="127.0.0.1", port=proxy.port), timeout=60)
        slow_time = time.monotonic() - started
        assert_matches(slow, compute(store.connection))
        # Each statement waited for its request and its answer: the delay was really there.
        assert proxy.queries >= 8
        assert slow_time >= proxy.queries * 2 * proxy.delay

        # Time for the connection and a few statements, not for the whole hot tier.
        (cut,) = scrape(site(host="127.0.0.1", port=proxy.port), timeout=8 * 2 * proxy.delay)
        assert (
            not cut.up
            or cut.value("actionscheduler_exporter_collector_success", collector="tables") == 0
        )
    finally:
        proxy.close()


def test_200_concurrent_scrapes_cause_one_round(
    store: ActionSchedulerStore,
    mariadb: Server,
    database: str,
    site: Callable[..., SiteConfig],
    exporter_http: Callable[..., RunningExporter],
) -> None:
    """Counted at the proxy, which sees only the exporter's own statements (another client
    of the same server changes nothing): one round of queries, not 200."""
    backlog(store)
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0)
    # The split at every round, so that every round sends the same statements.
    config = site(host="127.0.0.1", port=proxy.port, query_timeout=60.0, due_split_interval=0)
    running = exporter_http(config)
    locker = mariadb.connect(database)
    try:
        running.get("/metrics")  # connects, sets the log cursor, reads the heavy tier
        before = proxy.queries
        running.get("/metrics")
        one_round = proxy.queries - before

        # The round is held on a lock until every scrape has joined it, so that a loaded
        # machine cannot spread the scrapes over several rounds.
        statuses: list[int] = []
        threads = [
            threading.Thread(target=lambda: statuses.append(running.get("/metrics")[0]))
            for _ in range(200)
        ]
        with tables_locked(locker, ["wp_actionscheduler_claims"]):
            before, joined = proxy.queries, running.coordinator.joins()
            for thread in threads:
                thread.start()
            assert wait_until(lambda: running.coordinator.joins() == joined + 200, 60)
        for thread in threads:
            thread.join()
        rounds = (proxy.queries - before) / one_round
    finally:
        locker.close()
        proxy.close()
    assert statuses == [200] * 200
    # The round's one statement, and the split of the due backlog.
    assert one_round >= 1
    assert rounds == 1, rounds


def test_connections_the_network_dropped_never_report_a_healthy_site_down(
    store: ActionSchedulerStore, mariadb: Server, site: Callable[..., SiteConfig]
) -> None:
    """A proxy that closes connections idle for 3 s (a load balancer's idle timeout,
    ProxySQL, a short wait_timeout), then one that drops every connection (a failover):
    the exporter's pooled connections are dead at the next scrape, and every site is still
    `up 1` with its values; go's database/sql retries a bad pooled connection, so do we."""
    store.create("woocommerce_deliver_webhook_async")
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0, idle_close=3.0)
    shops = tuple(
        site(name=f"shop{index}", host="127.0.0.1", port=proxy.port) for index in range(6)
    )
    coordinator = Coordinator(ExporterConfig(sites=shops))
    try:
        for _ in range(3):
            results = coordinator.scrape(10.0)
            assert [result.up for result in results] == [True] * 6, results[0].problems
            assert all(result.value(DUE, claim="unclaimed") == 1 for result in results)
            # Idle past the proxy's timeout: it has dropped every pooled connection.
            assert wait_until(lambda: proxy.open_connections == 0, 30)
        assert proxy.dropped >= 3
        proxy.idle_close = None
        coordinator.scrape(10.0)
        assert proxy.drop_connections() >= 1  # a failover: the pool's connections are gone
        results = coordinator.scrape(10.0)
        assert [result.up for result in results] == [True] * 6, results[0].problems
        assert all(result.value(DUE, claim="unclaimed") == 1 for result in results)
    finally:
        coordinator.close()
        proxy.close()


DUE = "actionscheduler_due_actions"


def test_a_session_tells_a_released_connection_from_a_lost_one_and_a_failed_borrow(
    mariadb: Server,
) -> None:
    """`Session.lost` is what a round asks before its next collector (a store answered in
    another round's batch holds no connection, and is not lost for it): false once a
    connection was taken and handed back, true after one the network dropped or one that
    could not be taken, with that failure's problem (`connect_error`); an optional borrow
    that fails (reading other stores ahead) leaves the session as it was."""
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0)
    try:
        site = exporter_site(mariadb, port=proxy.port, user="root", password="", database="")
        session = Session(site, pool=ServerPool(f"127.0.0.1:{proxy.port}", 2))
        assert not session.has_connected and not session.lost
        session.open()
        session.release()
        assert session.has_connected and not session.lost and not session.connected
        assert session.query("SELECT 1") == [(1,)]  # borrowed again when needed
        assert proxy.drop_connections() >= 1
        with pytest.raises(QueryError) as dropped:
            session.query("SELECT 2")
        assert dropped.value.connection_lost and session.lost
        session.release()
        assert session.query("SELECT 3") == [(3,)] and not session.lost

        refused = exporter_site(mariadb, port=free_port(), query_timeout=1.0)
        nowhere = Session(refused, pool=ServerPool(f"127.0.0.1:{refused.port}", 1))
        assert not nowhere.try_open()
        assert not nowhere.lost and nowhere.connect_error is None
        with pytest.raises(QueryError):
            nowhere.ready()
        assert nowhere.lost and nowhere.connect_error is not None
        assert nowhere.connect_error.kind == "connect"
    finally:
        proxy.close()


def test_a_session_counts_the_statements_it_tried(mariadb: Server) -> None:
    """What the collectors' loop looks at before it looks at the deadline again: every
    statement tried, answered or failed, and one whose connection could not be taken
    (its wait is time the round spent)."""
    site = exporter_site(mariadb, user="root", password="", database="")
    session = Session(site, pool=ServerPool(f"{mariadb.host}:{mariadb.port}", 1))
    try:
        assert session.statements_tried == 0
        assert session.query("SELECT 1") == [(1,)]
        with pytest.raises(QueryError):
            session.query("SELECT * FROM no_such_database.no_such_table")
        assert session.statements_tried == 2
    finally:
        session.close()
    refused = exporter_site(mariadb, port=free_port(), query_timeout=1.0)
    nowhere = Session(refused, pool=ServerPool(f"127.0.0.1:{refused.port}", 1))
    with pytest.raises(QueryError):
        nowhere.query("SELECT 1")
    assert nowhere.statements_tried == 1


class _LockedOutAfter(Collector):
    """Sends a statement of its own in every store's round; armed, after it did so in
    `first`'s round, locks the exporter's user and closes its connections (on `admin`,
    opened before), as a DBA may do between two of the exporter's statements."""

    name = "locked_out_after"
    metrics: ClassVar[tuple[catalog.MetricDef, ...]] = ()

    def __init__(self, admin: pymysql.connections.Connection[Any], first: str) -> None:
        self._admin = admin
        self._first = first
        self.armed = False

    def read(self, context: DatabaseContext) -> tuple[Sample, ...]:
        context.one("SELECT 1")
        if self.armed and context.site.name == self._first:
            self.armed = False
            with self._admin.cursor() as cursor:
                cursor.execute("ALTER USER 'exporter'@'%' ACCOUNT LOCK")
                cursor.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'exporter'"
                )
                for (connection,) in cursor.fetchall():
                    cursor.execute(f"KILL CONNECTION {int(connection)}")
        return ()


def test_a_store_read_in_another_round_s_batch_whose_own_statement_cannot_borrow_is_down(
    private_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose hot statement another store's round read in its batch borrows a
    connection only for a statement of its own. When that borrow fails (here the DBA
    locked the exporter's user and closed its connections between the two rounds), the
    store is down with the borrow's problem, keeping the values the batch gave it, and
    the store that read the batch stays up; unlocked, both are up at the next scrape."""
    # The lock-out between the two rounds takes a few statements: on a loaded machine
    # more than the half second an answer read ahead is kept for its store.
    monkeypatch.setattr(read_ahead_module, "MAX_AGE", 30.0)
    admin = private_server.connect()
    with admin.cursor() as cursor:
        cursor.execute("CREATE USER 'exporter'@'%' IDENTIFIED BY 'exporter-pw'")
        for shop in ("shop_a", "shop_b"):
            cursor.execute(f"CREATE DATABASE {shop}")
            cursor.execute(f"GRANT SELECT ON {shop}.* TO 'exporter'@'%'")
            with private_server.connect(shop) as connection:
                store = ActionSchedulerStore(connection)
                store.create_tables()
                store.create("woocommerce_deliver_webhook_async")
    lockout = _LockedOutAfter(admin, "shop_a")
    shops = tuple(
        exporter_site(private_server, name=shop, database=shop, heavy_interval=3600.0)
        for shop in ("shop_a", "shop_b")
    )
    # One connection: the rounds run one after the other, shop_a's first.
    coordinator = Coordinator(ExporterConfig(sites=shops, connections_per_server=1), [lockout])
    read_ahead = coordinator.servers.for_site(shops[0]).read_ahead
    try:
        for _ in range(5):
            # Until shop_a's round reads shop_b's hot statement in its batch: the order
            # they ask in learnt, each store's statement answered alone and quickly.
            assert wait_until(lambda: _batched(coordinator, read_ahead), 30)
            lockout.armed = True
            try:
                a, b = coordinator.scrape(10.0)
            finally:
                lockout.armed = False  # shop_a's round may not have reached it
                with admin.cursor() as cursor:
                    cursor.execute("ALTER USER 'exporter'@'%' ACCOUNT UNLOCK")
            if b.value(DUE, claim="unclaimed") is not None:
                break  # shop_b's hot values came in the batch (its own statement would fail)
        else:
            pytest.fail("shop_b's hot statement was not answered in shop_a's batch")
        assert a.up, a.problems
        assert not b.up
        # Its pooled connection was closed: a new one is refused.
        assert "(4151) Access denied, this account is locked" in b.problems[0], b.problems
        assert b.value(DUE, claim="unclaimed") == 1
        assert (b.value(catalog.ERRORS.name, kind="connect") or 0) >= 1
        assert a.value(catalog.ERRORS.name, kind="connect") in (None, 0)
        a, b = coordinator.scrape(10.0)
        assert a.up and b.up, (a.problems, b.problems)
    finally:
        coordinator.close()
        admin.close()


def _batched(coordinator: Coordinator, read_ahead: ReadAhead) -> bool:
    """Scrapes once; whether a batch answered in it."""
    batches = read_ahead.batches
    coordinator.scrape(10.0)
    return read_ahead.batches > batches
