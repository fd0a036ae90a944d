"""The cached readings of a server's stores refreshed several in one statement
(`db.refresh_together`), on real MariaDB, counted at a proxy in front of it (the
exporter's own statements): the anomalies of stores that come due together read in a
statement or two instead of one per store, each store's values its own, a change seen
at the next refresh, a store that breaks failing alone, and no row served longer than
its reading's interval after it was read."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from actionscheduler_exporter.db.packed import PackedStatement
from actionscheduler_exporter.db.pool import reader_of
from actionscheduler_exporter.db.refresh_together import RefreshTogether
from actionscheduler_exporter.db.schema import table_names
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds import database_round
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.sources import cached_readings
from actionscheduler_exporter.sources.database import Columns
from testbed.mariadb import Server
from testbed.proxy import SlowProxy
from tests.support.store_databases import store_databases, store_site
from tests.test_read_ahead import PASSWORD, USER, Exporter, MovableClock, never_slow, settled

RUN = f"as_together_{secrets.token_hex(3)}"
STORES = 8
INTERVAL = 60.0
# Past every store's point of the interval (0.75 to 1.25 times it).
ALL_DUE = 1.25 * INTERVAL + 1


@pytest.fixture
def stores(mariadb: Server) -> Iterator[list[str]]:
    """Stores a database each: store n with n + 1 due actions and n undated ones."""
    names = [f"{RUN}_{index}" for index in range(STORES)]
    with store_databases(mariadb, names, USER, PASSWORD, due=lambda i: i + 1) as made:
        for index, database in enumerate(made):
            add_undated(mariadb, database, index)
        yield made


@pytest.fixture
def exporter(
    proxy: SlowProxy, stores: list[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Exporter, MovableClock]]:
    """The exporter over the stores with their anomalies read every minute, on a clock
    the test moves; no statement counts as slow, however loaded the machine."""
    monkeypatch.setattr(database_round, "TABLE_STATS_INTERVAL", 3600.0)
    never_slow(monkeypatch)
    clock = MovableClock()
    exporter = Exporter(proxy, stores, clock, anomalies_interval=INTERVAL)
    settled(exporter)
    yield exporter, clock
    exporter.close()


def add_undated(mariadb: Server, database: str, count: int) -> None:
    """`count` pending actions without a date (NULL: never claimed)."""
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        for number in range(count):
            cursor.execute(
                "INSERT INTO wp_actionscheduler_actions (hook, status, scheduled_date_gmt, args)"
                " VALUES ('undated', 'pending', NULL, %s)",
                (f"[{number}]",),
            )
        connection.commit()


def undated(result: SiteResult) -> float | None:
    return result.value(catalog.UNDATED_PENDING.name, date="null")


def together(exporter: Exporter) -> RefreshTogether:
    site = exporter.coordinator.config.sites[0]
    return exporter.coordinator.servers.for_site(site).refresh_together


def test_anomalies_come_due_together_are_read_in_a_statement_or_two_each_store_its_own(
    exporter: tuple[Exporter, MovableClock], stores: list[str]
) -> None:
    """Every store's anomalies come due in one scrape: before, each store sent them in a
    statement of its own (a scrape of n stores sent n + 1 statements or more); read
    together, the scrape sends the hot statements' batches and one or two more."""
    exporter_, clock = exporter
    for _ in range(2):
        clock.moved += ALL_DUE
        batches = together(exporter_).batches
        results, sent = exporter_.scrape()
        assert together(exporter_).batches > batches
        # Two connections: two batches of hot statements and two of anomalies at most,
        # and a store read apart once on a loaded machine (a hot batch read apart).
        assert sent < STORES, sent
        for index, database in enumerate(stores):
            assert results[database].up, results[database].problems
            assert undated(results[database]) == index, database
            assert results[database].value(catalog.ORPHANED_CLAIMS.name) == 0, database


def test_a_change_is_seen_at_the_next_refresh_read_together(
    exporter: tuple[Exporter, MovableClock], stores: list[str], mariadb: Server
) -> None:
    exporter_, clock = exporter
    clock.moved += ALL_DUE
    exporter_.scrape()
    add_undated(mariadb, stores[5], 3)
    results, _ = exporter_.scrape()
    assert undated(results[stores[5]]) == 5  # served from the reading until it comes due
    clock.moved += ALL_DUE
    batches = together(exporter_).batches
    results, _ = exporter_.scrape()
    assert together(exporter_).batches > batches
    assert undated(results[stores[5]]) == 5 + 3
    assert undated(results[stores[4]]) == 4 and undated(results[stores[6]]) == 6


def test_a_store_whose_table_is_dropped_fails_alone_and_the_others_keep_their_values(
    exporter: tuple[Exporter, MovableClock], stores: list[str], mariadb: Server
) -> None:
    """The claims table of a store read with the others is dropped: the batch with it
    fails, each other store reads its anomalies alone, up with its values; at the next
    refresh they are read together again, without the broken store."""
    exporter_, clock = exporter
    clock.moved += ALL_DUE
    exporter_.scrape()  # the anomalies read together once: the broken store among them
    broken = stores[3]
    with mariadb.connect(broken) as connection, connection.cursor() as cursor:
        cursor.execute("DROP TABLE wp_actionscheduler_claims")
    for _ in range(2):
        clock.moved += ALL_DUE
        results, _ = exporter_.scrape()
        assert not results[broken].up
        for index, database in enumerate(stores):
            if database != broken:
                assert results[database].up, results[database].problems
                assert undated(results[database]) == index, database
    batches = together(exporter_).batches
    clock.moved += ALL_DUE
    results, _ = exporter_.scrape()
    assert together(exporter_).batches > batches
    for index, database in enumerate(stores):
        if database != broken:
            assert undated(results[database]) == index, database


def test_a_row_read_ahead_is_taken_only_while_its_store_s_reading_may_be_served(
    mariadb: Server, stores: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stores on one login: the first's refresh reads the second's row as its reading
    comes due within a quarter of its interval; the second takes it while a reading made
    then may still be served (its interval after the row was read), not later, and not
    for another statement; a store due later than that is not read with them."""
    sites = [store_site(mariadb, database, USER, PASSWORD) for database in stores[:3]]
    sessions = [Session(site) for site in sites]
    # Its tables named in each store's database, as every collector's are.
    actions = table_names("wp_").actions
    columns = Columns((f"SELECT COUNT(*) FROM {actions} WHERE status = %s",), ("pending",))
    statement = PackedStatement(columns.subqueries, columns.args)
    keys = [
        ((reader_of(site), session.endpoint, "wp_"), "anomalies")
        for site, session in zip(sites, sessions, strict=True)
    ]
    never_slow(monkeypatch)
    shared = RefreshTogether()
    try:
        # At 100 the first is due; the second (110) within 15 s of it; the third not.
        for store, site, due_at in zip(keys, sites, (100.0, 110.0, 130.0), strict=True):
            shared.kept(store, statement, site.database, due_at, 60.0, 0.001, alone=True)
        # Store n holds n + 1 due actions and n undated ones: 2n + 1 pending.
        refreshed = shared.refresh(sessions[0], keys[0], statement, 100.0, 0.1)
        assert refreshed is not None and refreshed.row == (1,)
        assert shared.take(keys[2], statement, 101.0, 0.1) is None
        other = PackedStatement(("SELECT 1",), ())
        assert shared.take(keys[1], other, 110.0, 0.1) is None  # and now it is gone
        shared.refresh(sessions[0], keys[0], statement, 100.0, 0.1)
        assert shared.take(keys[1], statement, 100.0 + 60.0, 0.1) is None  # too old
        shared.refresh(sessions[0], keys[0], statement, 100.0, 0.1)
        taken = shared.take(keys[1], statement, 110.0, 0.1)
        assert taken is not None
        assert taken.row == (3,) and taken.read_at == 100.0
        assert shared.batches == 3
    finally:
        for session in sessions:
            session.close()


def test_a_store_due_soon_takes_its_row_when_due_and_reads_again_after_its_interval(
    proxy: SlowProxy, stores: list[str], mariadb: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Store 0's reading comes due after 48 s, store 1's after 54 s, the others' after
    75 s (their points of the interval, set here). At 50 s store 0 reads store 1's row
    with its own (due within a quarter of its interval), not the others' (further off).
    Store 1 takes that row when it comes due, sending nothing of its own: a change made
    since shows only once its reading has been served 54 s after the row was read."""
    monkeypatch.setattr(database_round, "TABLE_STATS_INTERVAL", 3600.0)
    never_slow(monkeypatch)
    points = {stores[0]: 0.8, stores[1]: 0.9}
    monkeypatch.setattr(
        cached_readings,
        "stagger",
        lambda site, _prefix, source: (
            points.get(site.split("\0")[0], 1.25) if source == "anomalies" else 1.0
        ),
    )
    clock = MovableClock()
    exporter = Exporter(proxy, stores, clock, anomalies_interval=INTERVAL)
    try:
        settled(exporter)
        clock.moved += ALL_DUE  # every store's anomalies read at once, now
        exporter.scrape()
        read = clock()

        def at(seconds: float) -> None:
            clock.moved += read + seconds - clock()

        at(50.0)
        batches = together(exporter).batches
        results, _ = exporter.scrape()
        assert together(exporter).batches == batches + 1
        assert undated(results[stores[1]]) == 1
        add_undated(mariadb, stores[1], 2)
        at(56.0)
        results, _ = exporter.scrape()
        assert together(exporter).batches == batches + 1
        assert undated(results[stores[1]]) == 1  # the row read at 50 s, taken at 56 s
        at(50.0 + 0.9 * INTERVAL + 1)
        results, _ = exporter.scrape()
        assert undated(results[stores[1]]) == 1 + 2
        for index, database in enumerate(stores):
            assert undated(results[database]) == index + 2 * (index == 1), database
    finally:
        exporter.close()


def test_the_tables_statistics_come_due_are_read_together_and_the_hot_statements_ahead(
    proxy: SlowProxy, stores: list[str], mariadb: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every store's tables' statistics come due in one scrape: read together, apart from
    the hot statements, which stay packed and read ahead with each other. In the hot
    statement, each store's was sent alone, in that scrape and the next: the scrape sent
    one statement per store and more. Each store's statistics are its own: its actions
    table's estimated rows are the server's for that table."""
    monkeypatch.setattr(database_round, "TABLE_STATS_INTERVAL", INTERVAL)
    never_slow(monkeypatch)
    clock = MovableClock()
    exporter = Exporter(proxy, stores, clock)
    try:
        settled(exporter)
        for _ in range(2):
            clock.moved += ALL_DUE
            before = estimated_rows(mariadb, stores)
            ahead, together_ = exporter.read_ahead.batches, together(exporter).batches
            results, sent = exporter.scrape()
            after = estimated_rows(mariadb, stores)
            assert together(exporter).batches > together_
            assert exporter.read_ahead.batches > ahead
            assert sent < STORES, sent
            for database in stores:
                rows = results[database].value(catalog.TABLE_ROWS.name, table="actions")
                assert rows in (before[database], after[database]), database
            results, sent = exporter.scrape()  # the next: read ahead as before
            assert sent < STORES, sent
    finally:
        exporter.close()


def estimated_rows(mariadb: Server, stores: list[str]) -> dict[str, int]:
    """Each store's actions table's estimated rows, as the server tells them now."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_SCHEMA, TABLE_ROWS FROM information_schema.TABLES"
            " WHERE TABLE_NAME = 'wp_actionscheduler_actions' AND TABLE_SCHEMA LIKE %s",
            (f"{RUN}%",),
        )
        found = {schema: int(rows) for schema, rows in cursor.fetchall()}
    return {database: found[database] for database in stores}
