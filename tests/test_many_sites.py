"""Many sites in one exporter, on real MariaDB: connections bounded per server and shared by
its sites (counted by the server, for the exporter's own user), one locked or unreachable
site costing the others nothing, databases discovered as they appear and disappear, and one
TLS context for all connections of the same TLS setting."""

from __future__ import annotations

import dataclasses
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pymysql
import pytest

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.db import tls_contexts
from actionscheduler_exporter.db.pool import ServerPool
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import quoted_identifier
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.sources.database import Collector, DatabaseContext
from testbed.mariadb import Server
from testbed.proxy import COM_INIT_DB, SlowProxy
from testbed.store import ActionSchedulerStore
from tests.support.locks import tables_locked
from tests.support.store_databases import store_databases
from tests.support.store_databases import store_site as user_site
from tests.support.waiting import sampled, wait_until

# Names of this run's own: another test run may use the same server at the same time.
RUN = f"as_many_{secrets.token_hex(3)}"
USER, PASSWORD = RUN, "many-sites-pw"
DATABASES = [f"{RUN}_{index}" for index in range(24)]


@pytest.fixture(scope="module")
def databases(mariadb: Server) -> Iterator[list[str]]:
    """Two dozen stores, a database each, with a due action per store number; read by a
    user of the exporter's own, so that its connections can be counted by the server."""
    with store_databases(mariadb, DATABASES, USER, PASSWORD, due=lambda i: i % 3 + 1) as made:
        yield made


def store_site(mariadb: Server, database: str, **overrides: Any) -> SiteConfig:
    return user_site(mariadb, database, USER, PASSWORD, **({"query_timeout": 2.0} | overrides))


def exporter_connections(mariadb: Server) -> int:
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (USER,)
        )
        return int(cursor.fetchone()[0])


def due(result: SiteResult) -> float | None:
    return result.value(catalog.DUE_ACTIONS.name, claim="unclaimed")


def test_connections_are_bounded_per_server_and_shared_by_its_sites(
    mariadb: Server, databases: list[str]
) -> None:
    config = ExporterConfig(
        sites=tuple(store_site(mariadb, database) for database in databases),
        connections_per_server=3,
    )
    coordinator = Coordinator(config)
    try:
        with sampled(lambda: exporter_connections(mariadb)) as seen:
            for _ in range(3):
                results = {result.label: result for result in coordinator.scrape(10.0)}
                for index, database in enumerate(databases):
                    assert results[database].up, results[database].problems
                    assert due(results[database]) == index % 3 + 1
        assert sum(coordinator.servers.open_connections().values()) <= 3
    finally:
        coordinator.close()
    assert seen and max(seen) <= 3, max(seen)
    assert wait_until(lambda: exporter_connections(mariadb) == 0, 10)


def test_sites_share_a_connection_without_switching_databases(
    mariadb: Server, databases: list[str]
) -> None:
    """Statements name their tables' database: one connection reads every database of
    its server without a switch (COM_INIT_DB, counted at a proxy), each site its own
    tables, a database whose name needs quoting (and holds a %, which the driver's
    formatting of arguments would read) too."""
    odd = f"{RUN}-odd`name%d"
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quoted_identifier(odd)}")
        cursor.execute(f"CREATE DATABASE {quoted_identifier(odd)}")
        cursor.execute(f"GRANT SELECT ON {quoted_identifier(odd)}.* TO '{USER}'@'%'")
    store = ActionSchedulerStore(mariadb.connect(odd))
    store.create_tables()
    for number in range(5):
        store.create("woocommerce_deliver_webhook_async", args=[number])
    store.connection.close()
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0)
    sites = [
        store_site(mariadb, database, host="127.0.0.1", port=proxy.port)
        for database in [*databases[:6], odd]
    ]
    coordinator = Coordinator(ExporterConfig(sites=tuple(sites), connections_per_server=1))
    try:
        for _ in range(3):
            results = {result.label: result for result in coordinator.scrape(10.0)}
            for index, database in enumerate(databases[:6]):
                assert results[database].up, results[database].problems
                assert due(results[database]) == index % 3 + 1
            assert due(results[odd]) == 5, results[odd].problems
        # The heavy tier's counts too, read on the same connection in the background.
        expected = {database: index % 3 + 1 for index, database in enumerate(databases[:6])}
        expected[odd] = 5

        def pending_counted() -> bool:
            results = {result.label: result for result in coordinator.scrape(10.0)}
            return all(
                results[name].value(catalog.ACTIONS.name, status="pending") == count
                for name, count in expected.items()
            )

        assert wait_until(pending_counted, 60)
        assert sum(coordinator.servers.open_connections().values()) <= 1
        assert proxy.sent(COM_INIT_DB) == 0
        assert proxy.queries > 3 * len(sites)
    finally:
        coordinator.close()
        proxy.close()
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {quoted_identifier(odd)}")


def test_a_missing_database_is_told_alike_on_a_new_and_a_borrowed_connection(
    mariadb: Server, databases: list[str]
) -> None:
    """A new connection to a database that is not there fails (the server says "unknown
    database", or "access denied" to a user with no grant on it); one borrowed from the
    pool, opened for another database, is not told: the round asks, and reports it the
    same way (down, kind `connect`, the database named), never as missing tables."""
    sites = (store_site(mariadb, databases[0]), store_site(mariadb, f"{RUN}_missing"))
    coordinator = Coordinator(ExporterConfig(sites=sites, connections_per_server=1))
    try:
        for _ in range(3):
            results = {result.label: result for result in coordinator.scrape(10.0)}
            assert results[databases[0]].up, results[databases[0]].problems
            missing = results[f"{RUN}_missing"]
            assert not missing.up
            assert f"{RUN}_missing" in missing.problems[0], missing.problems
            assert not [problem for problem in missing.problems if "missing table" in problem]
        assert missing.value(catalog.ERRORS.name, kind="missing_table") == 0
        assert (missing.value(catalog.ERRORS.name, kind="connect") or 0) >= 3
    finally:
        coordinator.close()


def test_a_locked_site_and_an_unreachable_server_cost_the_others_nothing(
    mariadb: Server,
    databases: list[str],
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    locked, *others = databases[:8]
    sites = [store_site(mariadb, database, query_timeout=1.0) for database in databases[:8]]
    unreachable = store_site(mariadb, f"{RUN}_gone", name="gone", port=1, query_timeout=1.0)
    config = ExporterConfig(sites=(*sites, unreachable), connections_per_server=2)
    blocker = connect()
    coordinator = Coordinator(config)
    try:
        with tables_locked(blocker, [f"`{locked}`.wp_actionscheduler_actions"]):
            results = {result.label: result for result in coordinator.scrape(10.0)}
    finally:
        coordinator.close()
    for index, database in enumerate(others, start=1):
        result = results[database]
        assert result.up and due(result) == index % 3 + 1, result.problems
        assert result.value(catalog.COLLECTOR_SUCCESS.name, collector="due") == 1.0
    assert results[locked].value(catalog.COLLECTOR_SUCCESS.name, collector="due") == 0.0
    assert any("due" in problem for problem in results[locked].problems)
    assert not results["gone"].up


def test_databases_are_discovered_as_they_appear_and_disappear(
    mariadb: Server, databases: list[str]
) -> None:
    pattern = RUN.replace("_", "\\_") + "\\_1%"  # _1, _10 ... _19
    expected = {d for d in databases if d.startswith(f"{RUN}_1")}
    entry = store_site(
        mariadb, "auto", name="agency", database_pattern=pattern, discovery_interval=0.2
    )
    empty = store_site(
        mariadb, "auto", name="none", database_pattern="as\\_nothing\\_%", discovery_interval=0.2
    )
    coordinator = Coordinator(ExporterConfig(sites=(entry, empty)))

    def sites() -> dict[str, SiteResult]:
        return {result.label: result for result in coordinator.scrape(10.0)}

    try:
        found = sites()
        assert {name for name in found if name.startswith("agency:")} == {
            f"agency:{database}" for database in expected
        }
        assert all(found[f"agency:{d}"].up for d in expected)
        assert not found["none"].up and "no database matching" in found["none"].problems[0]

        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {RUN}_1_new")
            cursor.execute(f"GRANT SELECT ON {RUN}_1_new.* TO '{USER}'@'%'")
            cursor.execute(f"CREATE DATABASE {RUN}_1_no_plugin")  # no Action Scheduler
            cursor.execute(f"GRANT SELECT ON {RUN}_1_no_plugin.* TO '{USER}'@'%'")
            cursor.execute(f"CREATE TABLE {RUN}_1_no_plugin.wp_posts (id INT)")
        ActionSchedulerStore(mariadb.connect(f"{RUN}_1_new")).create_tables()
        assert wait_until(lambda: f"agency:{RUN}_1_new" in sites(), 10)
        assert f"agency:{RUN}_1_no_plugin" not in sites()

        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE {RUN}_1_new")
        assert wait_until(lambda: f"agency:{RUN}_1_new" not in sites(), 10)
    finally:
        coordinator.close()
        with mariadb.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {RUN}_1_new")
            cursor.execute(f"DROP DATABASE IF EXISTS {RUN}_1_no_plugin")


def test_connections_of_one_tls_setting_share_one_context(
    mariadb: Server, databases: list[str]
) -> None:
    """PyMySQL would build (and load the CA store into) a TLS context per connection."""
    config = ExporterConfig(
        sites=tuple(store_site(mariadb, database) for database in databases),
        connections_per_server=8,
    )
    before = tls_contexts.shared_contexts()
    coordinator = Coordinator(config)
    try:
        coordinator.scrape(10.0)
        lane = coordinator.servers.for_site(config.sites[0])
        contexts = {
            id(getattr(pooled.connection, "ctx", None)) for pooled in lane.pool.idle_connections()
        }
    finally:
        coordinator.close()
    assert len(contexts) == 1
    assert tls_contexts.shared_contexts() <= before + 1


def test_the_heavy_refreshes_of_a_server_run_one_at_a_time(
    mariadb: Server, databases: list[str]
) -> None:
    """A thousand sites must not start a thousand refreshes at once on their server."""
    sleeping = SleepingHeavyCollector(0.3)
    config = ExporterConfig(
        sites=tuple(store_site(mariadb, database, heavy_interval=60) for database in databases[:6])
    )
    coordinator = Coordinator(config, (sleeping,))
    try:
        with sampled(lambda: sleeping_queries(mariadb)) as seen:
            coordinator.scrape(10.0)  # starts every site's first refresh
            assert wait_until(lambda: sleeping.runs == len(config.sites), 30)
    finally:
        coordinator.close()
    assert max(seen) == 1  # one after the other, never two at once


def test_a_borrowed_connection_takes_the_borrowers_query_timeout(
    mariadb: Server, databases: list[str]
) -> None:
    """The rounds (query_timeout) and the heavy tier (heavy_query_timeout) borrow the same
    connections of a full pool: each sets its own bound on the connection, so a round's
    statement is still stopped at the round's timeout after a refresh used it, and a
    refresh's at its own (the server's variables, on one connection throughout)."""
    rounds = store_site(mariadb, databases[0], query_timeout=1.0)
    refresh = dataclasses.replace(rounds, query_timeout=30.0)
    pool = ServerPool(rounds.endpoint, 1)

    def bound(site: SiteConfig) -> tuple[Any, ...]:
        session = Session(site, pool=pool)
        try:
            (row,) = session.query(
                "SELECT CONNECTION_ID(), @@max_statement_time, @@lock_wait_timeout,"
                " @@GLOBAL.lock_wait_timeout, @@tx_read_only"
            )
            return (int(row[0]), float(row[1]), int(row[2]), int(row[3]), int(row[4]))
        finally:
            session.release()

    def client_wait() -> float:
        (idle,) = pool.idle_connections()
        return float(idle.connection._read_timeout)  # type: ignore[attr-defined]

    try:
        first = bound(rounds)
        assert client_wait() == 3  # the query timeout and 2 s for the server's own error
        heavy = bound(refresh)
        assert client_wait() == 32
        again = bound(rounds)
        assert client_wait() == 3
        assert first[0] == heavy[0] == again[0]  # one connection throughout
        assert heavy[1:3] == (30.0, 15)  # a lock wait of half the timeout
        # Under 2 s no lock wait of its own: the server's again, not the refresh's.
        assert first[1:3] == again[1:3] == (1.0, first[3])
        assert first[4] == heavy[4] == again[4] == 1  # read-only throughout
        session = Session(rounds, pool=pool)
        with pytest.raises(QueryError) as stopped:
            session.query("SELECT SLEEP(5)")
        assert stopped.value.kind == "timeout"
        session.release()
    finally:
        pool.close()


def test_a_connection_killed_while_idle_is_replaced_for_the_other_tier_too(
    mariadb: Server, databases: list[str]
) -> None:
    """A round (or refresh) borrowing the other tier's connection that was killed while
    idle fails to set its timeout on it: the connection is closed, its slot given back (a
    pool of one would wait its whole timeout otherwise), and the round's connecting or
    the refresh's statement is done again on a new connection, nothing reported."""
    rounds = store_site(mariadb, databases[0], query_timeout=2.0)
    refresh = dataclasses.replace(rounds, query_timeout=30.0)
    pool = ServerPool(rounds.endpoint, 1)

    def connection_id(site: SiteConfig, *, open_first: bool = False) -> int:
        session = Session(site, pool=pool)
        try:
            if open_first:
                session.open()  # as a round does, before its first statement
            return int(session.query("SELECT CONNECTION_ID()")[0][0])
        finally:
            session.release()

    def kill(connection: int) -> None:
        with mariadb.connect() as admin, admin.cursor() as cursor:
            cursor.execute(f"KILL CONNECTION {connection}")
        assert wait_until(lambda: connection not in processlist_ids(mariadb), 10)

    try:
        killed = connection_id(refresh)
        kill(killed)
        replaced = connection_id(rounds, open_first=True)
        assert replaced != killed
        kill(replaced)
        again = connection_id(refresh)
        assert again not in (killed, replaced)
        assert connection_id(rounds) == again  # the one slot is free again
        assert pool.open_connections() == 1
    finally:
        pool.close()


def processlist_ids(mariadb: Server) -> set[int]:
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (USER,))
        return {int(row[0]) for row in cursor.fetchall()}


def test_heavy_refreshes_take_turns_on_the_rounds_connections(
    mariadb: Server, databases: list[str]
) -> None:
    """Refreshes, with their longer timeout, borrow the rounds' connections instead of
    closing one to open their own: over scrapes and a dozen refreshes of a full pool, no
    more connections are ever made than connections_per_server (counted at a proxy), and
    every site stays up."""
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0)
    counting = SleepingHeavyCollector(0)
    # Rounds that may wait for a connection as long as a loaded machine makes them.
    heavy = {"heavy_interval": 0.2, "heavy_query_timeout": 30.0, "query_timeout": 10.0}
    through_proxy = {"host": "127.0.0.1", "port": proxy.port}
    sites = tuple(
        store_site(mariadb, database, **heavy, **through_proxy) for database in databases[:4]
    )
    config = ExporterConfig(sites=sites, connections_per_server=2)
    coordinator = Coordinator(config, (counting,))

    def refreshed() -> bool:
        for result in coordinator.scrape(10.0):
            assert result.up, result.problems
        return counting.runs >= 3 * len(sites)

    try:
        assert wait_until(refreshed, 120)
        assert proxy.accepted == 2, proxy.accepted
    finally:
        coordinator.close()
        proxy.close()


class SleepingHeavyCollector(Collector):
    """A heavy collector whose statement sleeps on the server, and counts its runs."""

    name = "sleeping"
    tier = "heavy"
    metrics: ClassVar[tuple[catalog.MetricDef, ...]] = ()

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.runs = 0
        self._lock = threading.Lock()

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        context.query("SELECT SLEEP(%s)", (self.seconds,))
        with self._lock:
            self.runs += 1
        yield from ()


def sleeping_queries(mariadb: Server) -> int:
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
            " WHERE USER = %s AND INFO LIKE 'SELECT SLEEP%%'",
            (USER,),
        )
        return int(cursor.fetchone()[0])


def test_healthy_sites_beside_locked_neighbours_stay_up_with_their_samples(
    mariadb: Server,
    databases: list[str],
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    """Six sites on one server, four of them behind `LOCK TABLES ... WRITE` (a backup, an
    ALTER): the locked ones give their round back after the lock wait, and the two others
    are read and `up 1` with their values at every scrape, not `up 0` behind them."""
    chosen = databases[8:14]
    locked, healthy = chosen[:4], chosen[4:]
    config = ExporterConfig(
        sites=tuple(store_site(mariadb, db, query_timeout=5.0) for db in chosen)
    )
    with tables_locked(connect(), [f"`{db}`.wp_actionscheduler_actions" for db in locked]):
        scrapes = scraped(config, 2)
    for results in scrapes:
        for database in healthy:
            result = results[database]
            index = databases.index(database)
            assert result.up and due(result) == index % 3 + 1, result.problems
        for database in locked:
            result = results[database]
            assert result.up  # the server answered; its tables are locked
            assert (result.value(catalog.ERRORS.name, kind="lock") or 0) >= 1, result.problems


def test_a_site_stuck_in_its_round_holds_only_itself_at_the_next_scrape(
    mariadb: Server,
    databases: list[str],
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    """Issue 40: a server's sites' rounds are started as one run (`scrape.lane_rounds`).
    A site whose round waits on a lock past the scrape's deadline holds its own round
    alone: the next scrape joins it, and reads its neighbour again, a change included."""
    stuck, beside = databases[16], databases[17]
    config = ExporterConfig(
        sites=tuple(store_site(mariadb, db, query_timeout=30.0) for db in (stuck, beside)),
        connections_per_server=2,
    )
    coordinator = Coordinator(config)
    marker = "as_exporter_test_beside"
    added = mariadb.connect(beside)
    try:
        coordinator.scrape(10.0)  # the heavy tier's first values, which a first round waits for
        with tables_locked(connect(), [f"`{stuck}`.wp_actionscheduler_actions"]):
            first = {result.label: result for result in coordinator.scrape(4.0)}
            was = due(first[beside])
            assert first[beside].up and was == databases.index(beside) % 3 + 1
            ActionSchedulerStore(added).create(marker)
            second = {result.label: result for result in coordinator.scrape(4.0)}
            assert second[beside].up and due(second[beside]) == was + 1, second[beside].problems
            for results in (first, second):  # one round, still waiting on the lock
                assert any("deadline" in problem for problem in results[stuck].problems)
    finally:
        coordinator.close()
        with added.cursor() as cursor:
            cursor.execute("DELETE FROM wp_actionscheduler_actions WHERE hook = %s", (marker,))
        added.close()


def test_healthy_subsites_of_a_network_stay_up_beside_locked_ones(
    mariadb: Server,
    database: str,
    connect: Callable[[], pymysql.connections.Connection[Any]],
    site: Callable[..., SiteConfig],
) -> None:
    prefixes = ["wp_", *(f"wp_{index}_" for index in range(2, 11))]
    for number, prefix in enumerate(prefixes):
        store = ActionSchedulerStore(mariadb.connect(database), prefix)
        store.create_tables()
        for index in range(number % 3 + 1):
            store.create("woocommerce_deliver_webhook_async", args=[index])
        store.connection.close()
    locked = prefixes[1:5]
    config = ExporterConfig(sites=(site(name="net", table_prefix="auto", query_timeout=5.0),))
    with tables_locked(connect(), [f"`{database}`.{p}actionscheduler_actions" for p in locked]):
        scrapes = scraped(config, 3)
    for results in scrapes:
        for number, prefix in enumerate(prefixes):
            result = results[f"net:{prefix}"]
            assert result.up, result.problems
            if prefix not in locked:
                assert due(result) == number % 3 + 1, result.problems


def scraped(config: ExporterConfig, count: int) -> list[dict[str, SiteResult]]:
    """`count` scrapes of one exporter, each as its results by site label."""
    coordinator = Coordinator(config)
    try:
        return [{result.label: result for result in coordinator.scrape(10.0)} for _ in range(count)]
    finally:
        coordinator.close()


def test_a_quiet_site_costs_one_statement_per_scrape_at_the_proxy(
    mariadb: Server, database: str, store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """What a thousand sites' scrape is made of, counted at a proxy in front of the server
    (the exporter's own statements): a quiet store costs one statement per scrape, one
    with something due two (the split of the backlog at every scrape here), and new log
    rows their own. A change that adds a statement per site fails here."""
    later = store.now().replace(year=store.now().year + 1)
    store.create("woocommerce_scheduled_subscription_payment", scheduled=later)
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0)
    config = site(host="127.0.0.1", port=proxy.port, due_split_interval=0)
    coordinator = Coordinator(ExporterConfig(sites=(config,)))

    def statements_of_a_scrape() -> int:
        before = proxy.queries
        (result,) = coordinator.scrape(10.0)
        assert result.up, result.problems
        return proxy.queries - before

    try:
        statements_of_a_scrape()  # connects, places the log cursor, the heavy tier's walk
        assert statements_of_a_scrape() == 1
        store.create("woocommerce_deliver_webhook_async")  # due now, and a new log row
        assert statements_of_a_scrape() == 2 + 2  # the split; the new rows, their actions
        assert statements_of_a_scrape() == 2
    finally:
        coordinator.close()
        proxy.close()
