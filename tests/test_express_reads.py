"""The express read of a store whose hot statement another round's batch answered
(`rounds.hot_statement.ExpressPlans`) against the normal read, on real MariaDB.

Two exporters read the same stores, one as it runs in production and one with the
express read off, scraped in turn: their results are the same, sample for sample and in
the same order, but for the values that move with the clock between the two scrapes
(ages, durations, database time) and the error counts each exporter keeps since it
started. The stores are in the states the scenarios make (a backlog, running claims and
a killed worker's, zero-dated and NULL-dated actions, failures, finished and canceled
actions, Action Scheduler 4's corrupted actions), and between the scrapes they change
(new log rows, a backlog growing), break (a table dropped, a table locked) and lose
their connections."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actionscheduler_exporter.collectors.log_events.collector import LogEventsCollector
from actionscheduler_exporter.config import ExporterConfig
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.read_ahead import Key, ReadAhead
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.errors import SourceError
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Labels
from actionscheduler_exporter.rounds import hot_statement
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.sources.database import DatabaseContext
from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore
from tests.support import scenarios
from tests.support.locks import tables_locked
from tests.support.store_databases import store_databases, store_site
from tests.support.waiting import wait_until

RUN = f"as_express_{secrets.token_hex(3)}"
USER, PASSWORD = RUN, "express-pw"


def null_dated(store: ActionSchedulerStore) -> None:
    scenarios.backlog(store)
    action = store.create("woocommerce_run_product_attribute_lookup_update")
    with store.connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {store.actions} SET scheduled_date_gmt = NULL WHERE action_id = %s",
            (action,),
        )
    store.connection.commit()


def quiet(store: ActionSchedulerStore) -> None:
    """Nothing due, nothing running, nothing ever run."""


# Each store's state, by index; the last ones are broken or changed between scrapes.
STATES: tuple[Callable[[ActionSchedulerStore], None], ...] = (
    quiet,
    scenarios.healthy_flow,
    scenarios.backlog,
    scenarios.failing_hooks,
    scenarios.killed_worker,
    scenarios.killed_worker_after_cleaner,
    scenarios.only_future,
    scenarios.zero_dates,
    null_dated,
    scenarios.finished_and_canceled,
    scenarios.as4_corrupted_and_worker,
    scenarios.healthy_flow,  # its log grows between scrapes
    scenarios.backlog,  # its claims table is dropped
    scenarios.healthy_flow,  # its actions table is locked
    quiet,
    quiet,
    quiet,
    quiet,
)
GROWING, DROPPED, LOCKED, LOST = 11, 12, 13, 14

# Values that move between the two exporters' scrapes: with the clock, or as the server
# refreshes its own estimates (InnoDB's table statistics, recalculated in the background
# after a store's rows changed, which each exporter reads at its own moment and keeps for
# minutes: 131072 against 196608 bytes once, in a loaded pair).
MOVING = frozenset(
    metric.name
    for metric in (
        catalog.TABLE_ROWS,
        catalog.TABLE_SIZE,
        catalog.OLDEST_DUE_AGE,
        catalog.OLDEST_DUE_AGE_BY_GROUP,
        catalog.OLDEST_DUE_AGE_BY_HOOK,
        catalog.OLDEST_IN_PROGRESS_AGE,
        catalog.OLDEST_CLAIM_AGE,
        catalog.OLDEST_FINISHED_AGE,
        catalog.COLLECTOR_LAST_SUCCESS,
        catalog.COLLECTOR_DURATION,
        catalog.DATABASE_SECONDS,
        catalog.SCRAPE_DURATION,
        # Counted since each exporter started: a deadline in one's warm-up on a loaded
        # machine stays in its count. The faults below check their own.
        catalog.ERRORS,
    )
)


@pytest.fixture(scope="module")
def stores(mariadb: Server) -> Iterator[list[str]]:
    names = [f"{RUN}_{index}" for index in range(len(STATES))]
    with store_databases(mariadb, names, USER, PASSWORD, due=lambda _: 0) as made:
        for database, state in zip(made, STATES, strict=True):
            store = ActionSchedulerStore(mariadb.connect(database))
            state(store)
            store.connection.close()
        yield made


class Exporter:
    def __init__(self, mariadb: Server, stores: list[str]) -> None:
        sites = tuple(
            store_site(
                mariadb,
                database,
                USER,
                PASSWORD,
                query_timeout=5.0,
                # No claim turns stale between the two exporters' first rounds, which
                # read the anomalies once here.
                timeout_period=30 * 86400.0,
                # Cached readings and the heavy tier read once here: what comes due
                # between two exporters' scrapes would only differ in its ages.
                due_split_interval=3600.0,
                anomalies_interval=3600.0,
                heavy_interval=3600.0,
            )
            for database in stores
        )
        self.coordinator = Coordinator(ExporterConfig(sites=sites, connections_per_server=2))
        self.read_ahead = self.coordinator.servers.for_site(sites[0]).read_ahead

        # The errors of the kinds a loaded machine makes (deadlines, statement timeouts)
        # counted so far, as the last scrape told.
        self.late = 0.0

    def scrape(self) -> dict[str, SiteResult]:
        results = {result.label: result for result in self.coordinator.scrape(10.0)}
        self.late = sum(
            result.value(catalog.ERRORS.name, kind=kind) or 0.0
            for result in results.values()
            for kind in ("deadline", "timeout")
        )
        return results


@pytest.fixture
def exporters(
    mariadb: Server, stores: list[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Exporter, Exporter]]:
    """The express exporter and the normal one, each with its stores' order learnt, its
    statements packed and its heavy tier read, and the express one taking answers read
    ahead (their results the same meanwhile)."""
    pair = Exporter(mariadb, stores), Exporter(mariadb, stores)
    try:
        for exporter in pair:
            assert wait_until(lambda e=exporter: heavy_read(e.scrape()), 60)  # type: ignore[misc]
        express_scrapes(*pair, monkeypatch, stores)
        yield pair
    finally:
        for exporter in pair:
            exporter.coordinator.close()


def heavy_read(results: dict[str, SiteResult]) -> bool:
    """Every store's heavy tier read, but those a test before broke."""
    return all(
        result.value(catalog.COLLECTOR_LAST_SUCCESS.name, collector="status") is not None
        for result in results.values()
        if result.up
    )


def comparable(
    result: SiteResult,
) -> tuple[bool, list[tuple[str, Labels, float | None]], list[str]]:
    """A result as both reads must give it: its samples in order, those that move with
    the clock without their values."""
    samples = [
        (item.metric.name, item.labels, None if item.metric.name in MOVING else item.value)
        for item in result.samples
    ]
    return result.up, samples, result.problems


def scraped_both(
    express: Exporter, normal: Exporter, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, SiteResult], dict[str, SiteResult]]:
    """One scrape of each, the normal exporter's with the express read off."""
    first = express.scrape()
    with monkeypatch.context() as off:
        off.setattr(hot_statement, "EXPRESS", False)
        taken = normal.read_ahead.taken
        second = normal.scrape()
        assert normal.read_ahead.taken == taken
    return first, second


def assert_same(
    express: dict[str, SiteResult], normal: dict[str, SiteResult], stores: list[str]
) -> None:
    assert express.keys() == normal.keys() >= set(stores)
    for database in stores:
        fast, slow = comparable(express[database]), comparable(normal[database])
        assert fast == slow, (database, differences(fast[1], slow[1]), fast[2], slow[2])


def differences(fast: list[Any], slow: list[Any]) -> list[tuple[int, Any, Any]]:
    """Where two results' samples differ (their place, the express one's, the normal
    one's): what a failure names, rather than the first of two long lists."""
    return [
        (place, *pair)
        for place, pair in enumerate(itertools.zip_longest(fast, slow))
        if pair[0] != pair[1]
    ][:10]


def express_scrapes(
    express: Exporter, normal: Exporter, monkeypatch: pytest.MonkeyPatch, stores: list[str]
) -> None:
    """Scrapes both until the express exporter took answers read ahead in a scrape (a
    loaded machine may read a batch apart once), each pair the same but a pair in which
    a loaded machine made a store miss the deadline or a statement time out."""
    for _ in range(20):
        taken, late = express.read_ahead.taken, express.late + normal.late
        first, second = scraped_both(express, normal, monkeypatch)
        if express.late + normal.late > late:
            continue  # a deadline or a timeout on a loaded machine: not the reads' doing
        assert_same(first, second, stores)
        if express.read_ahead.taken - taken >= len(stores) // 2:
            return
    pytest.fail("the express exporter took few answers read ahead in 20 scrapes")


def test_express_reads_give_what_normal_reads_give(
    exporters: tuple[Exporter, Exporter],
    stores: list[str],
    mariadb: Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    express, normal = exporters
    # New log rows, and a backlog that grows: both count the same.
    growing = ActionSchedulerStore(mariadb.connect(stores[GROWING]))
    scenarios.healthy_flow(growing)
    growing.connection.close()
    first, second = scraped_both(express, normal, monkeypatch)
    assert_same(first, second, stores)
    created = first[stores[GROWING]].samples
    assert sum(s.value for s in created if s.metric is catalog.CREATED) == 80
    express_scrapes(express, normal, monkeypatch, stores)


def test_express_reads_of_broken_stores_give_what_normal_reads_give(
    exporters: tuple[Exporter, Exporter],
    stores: list[str],
    mariadb: Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    express, normal = exporters
    dropped = stores[DROPPED]
    with mariadb.connect(dropped) as connection, connection.cursor() as cursor:
        cursor.execute("DROP TABLE wp_actionscheduler_claims")
    first, second = scraped_both(express, normal, monkeypatch)
    assert not first[dropped].up and "missing table(s)" in first[dropped].problems[0]
    assert_same(first, second, stores)
    # A table locked: the batch with it waits, then each store is read alone.
    locked = stores[LOCKED]
    with (
        mariadb.connect() as holder,
        tables_locked(holder, [f"`{locked}`.wp_actionscheduler_actions"]),
    ):
        first, second = scraped_both(express, normal, monkeypatch)
    for results in (first, second):
        assert (results[locked].value(catalog.ERRORS.name, kind="lock") or 0) >= 1
        assert (results[dropped].value(catalog.ERRORS.name, kind="missing_table") or 0) >= 2
    others = [database for database in stores if database != locked]
    assert_same(first, second, others)
    # Every connection of both exporters killed while idle: replaced, nothing reported.
    with mariadb.connect() as admin, admin.cursor() as cursor:
        cursor.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (USER,))
        for (connection,) in cursor.fetchall():
            cursor.execute(f"KILL CONNECTION {int(connection)}")
    first, second = scraped_both(express, normal, monkeypatch)
    assert_same(first, second, stores)
    express_scrapes(express, normal, monkeypatch, stores)


def test_a_connection_lost_as_an_express_read_reads_the_next_stores_fails_its_store_as_lost(
    exporters: tuple[Exporter, Exporter],
    stores: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store whose express read takes its answer and reads the next stores ahead can
    lose its connection there (`ReadAhead.take` raises as the batch's statement does):
    the store is down for that, counted as the connection's error, not as an answer that
    did not fit; the next scrape reads it again."""
    express, _ = exporters
    broken = express.coordinator.config.sites[LOST]
    take = ReadAhead.take
    raised: list[str] = []

    def losing(read_ahead: ReadAhead, session: Session, key: Key, *args: Any) -> Any:
        taken = take(read_ahead, session, key, *args)
        if taken is not None and session.endpoint[3] == broken.database and not raised:
            raised.append(broken.database)
            raise QueryError("connect", "Lost connection to server", connection_lost=True)
        return taken

    monkeypatch.setattr(ReadAhead, "take", losing)
    for _ in range(20):
        results = express.scrape()
        if raised:
            break
    assert raised, "the store never took its answer read ahead in 20 scrapes"
    lost = results[broken.database]
    assert not lost.up and lost.problems[0] == "Lost connection to server"
    assert lost.value(catalog.ERRORS.name, kind="connect") == 1
    assert not lost.value(catalog.ERRORS.name, kind="malformed")
    assert express.scrape()[broken.database].up


def test_a_plan_follows_its_log_streams_first_reading(
    mariadb: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log events' first reading of a store asks for the id increment too. When it
    fails (here: once per store), the next round's statement, packed by then and read
    with the kept statistics, still asks for it, and its plan is made of it; the stream's
    reading in that round then starts the cursor, and the plan's statement is no longer
    the one the store's normal read asks. Such a plan finds no answer read ahead (a batch
    is sent by a normal read, of stores whose answers have its statement's types), and
    is dropped at its next round: the statements read ahead later no longer ask for the
    increment."""
    databases = [f"{RUN}_first_{index}" for index in range(8)]
    sent: list[str] = []
    typed = Session.query_typed

    def recorded(session: Session, sql: str, args: Any = None) -> Any:
        sent.append(sql)
        return typed(session, sql, args)

    read = LogEventsCollector.read
    failed: set[str] = set()

    def failing_once(collector: LogEventsCollector, context: DatabaseContext) -> Any:
        database = context.site.database
        if database not in failed:
            failed.add(database)
            raise SourceError("query", "the log's first reading failed")
        return read(collector, context)

    monkeypatch.setattr(LogEventsCollector, "read", failing_once)

    with store_databases(mariadb, databases, USER, PASSWORD, due=lambda _: 1):
        sites = tuple(
            store_site(mariadb, database, USER, PASSWORD, heavy_interval=3600.0)
            for database in databases
        )
        coordinator = Coordinator(ExporterConfig(sites=sites, connections_per_server=2))
        read_ahead = coordinator.servers.for_site(sites[0]).read_ahead
        try:
            for _ in range(20):
                taken = read_ahead.taken
                coordinator.scrape(10.0)
                if read_ahead.taken - taken >= len(databases) // 2:
                    break
            else:
                pytest.fail("the stores took few answers read ahead in 20 scrapes")
            assert failed == set(databases)
            monkeypatch.setattr(Session, "query_typed", recorded)
            results = coordinator.scrape(10.0)
            assert all(result.up for result in results), results
            assert sent, "no statement read the stores together"
            assert not [sql for sql in sent if "auto_increment_increment" in sql]
        finally:
            coordinator.close()
