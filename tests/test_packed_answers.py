"""The round's statement answered in one column (`db.packed`), on a real MariaDB: the
values are the ones the same statement gives in columns, for every hot collector's
subqueries on a store in every state they read, and for every type the server may give a
subquery; what cannot be packed stays in columns; the round packs from its second
statement on, and its samples do not change for it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from decimal import Decimal

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.db.packed import PackedStatement
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.sources.database import DatabaseContext
from actionscheduler_exporter.timing import Deadline
from testbed.hot_sql import RecordingSession
from testbed.store import ActionSchedulerStore
from tests.support.scenarios import healthy_flow

# Every type a scalar subquery may have that is packed, NULL among them.
_TYPED = (
    "SELECT 7",
    "SELECT -3",
    "SELECT 18446744073709551615",
    "SELECT CAST(2.5 AS DECIMAL(10, 3))",
    "SELECT 1e-7",
    "SELECT CAST(1.25 AS DOUBLE)",
    "SELECT CAST('2026-12-02 11:36:46' AS DATETIME)",
    "SELECT CAST('2026-12-02 11:36:46.250000' AS DATETIME(6))",
    "SELECT CAST('2026-12-02' AS DATE)",
    "SELECT NULL + 0",
    "SELECT MAX(1) FROM DUAL WHERE 1 = 0",
)


def _a_store_in_every_state(store: ActionSchedulerStore) -> None:
    healthy_flow(store)
    store.create("woocommerce_deliver_webhook_async", args=["due"])
    with store.seconds_ago(600):
        store.create("woocommerce_scheduled_subscription_payment", args=["late"])
    claim = store.stake_claim(batch_size=1)
    store.start(claim.action_ids[0])
    with store.connection.cursor() as cursor:  # zero-dated and undated pending actions
        cursor.execute("SET SESSION sql_mode = ''")
        cursor.execute(
            f"INSERT INTO {store.actions} (hook, status, scheduled_date_gmt, args)"
            " VALUES ('zero_dated', 'pending', '0000-00-00 00:00:00', '[]'),"
            " ('undated', 'pending', NULL, '[]')"
        )


def _hot_subqueries(site: SiteConfig, session: Session) -> tuple[list[str], tuple[object, ...]]:
    """The subqueries and arguments of every hot collector of the site, in one statement."""
    context = DatabaseContext(session, TableNames(site.table_prefix), site, {})
    queries: list[str] = []
    args: list[object] = []
    for collector in site_sources(site).without_heavy().in_round:
        columns = collector.columns(context)
        if columns is not None:
            queries += columns.subqueries
            args += columns.args
    return queries, tuple(args)


def _both_ways(session: Session, statement: PackedStatement) -> tuple[object, ...]:
    rows, types = session.query_typed(statement.sql, statement.args)
    statement.learn(types)
    assert statement.packed is not None, types
    packed = statement.unpack(session.query(statement.packed, statement.args))
    assert packed == rows[0]
    assert [type(value) for value in packed or ()] == [type(value) for value in rows[0]]
    return rows[0]


def test_every_hot_collectors_values_come_back_the_same_packed(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    _a_store_in_every_state(store)
    config = site()
    session = Session(config, check_grants=False)
    try:
        queries, args = _hot_subqueries(config, session)
        assert len(queries) >= 9
        values = _both_ways(session, PackedStatement(queries, args))
        assert (
            isinstance(values[0], int) and values[0] >= 1
        )  # something is due: the comparison is not of zeros alone
    finally:
        session.close()


def test_every_packed_type_and_null_comes_back_as_the_driver_makes_it(
    site: Callable[..., SiteConfig],
) -> None:
    session = Session(site(), check_grants=False)
    try:
        values = _both_ways(session, PackedStatement(_TYPED, ()))
    finally:
        session.close()
    assert values[2] == 18446744073709551615
    assert values[3] == Decimal("2.500")
    assert values[7] == dt.datetime(2026, 12, 2, 11, 36, 46, 250000)
    assert values[9] is None and values[10] is None


def test_a_statement_with_a_text_column_stays_in_columns(
    site: Callable[..., SiteConfig],
) -> None:
    session = Session(site(), check_grants=False)
    try:
        statement = PackedStatement(("SELECT 1", "SELECT 'a,b'"), ())
        rows, types = session.query_typed(statement.sql, statement.args)
        statement.learn(types)
    finally:
        session.close()
    assert rows == [(1, "a,b")]
    assert statement.packed is None


def test_an_answer_that_cannot_be_a_packed_one_is_not_used() -> None:
    statement = PackedStatement(("SELECT 1", "SELECT NOW()"), ())
    statement.learn((8, 12))  # LONGLONG, DATETIME
    assert statement.unpack([("=1,=2026-12-02 11:36:46",)]) == (
        1,
        dt.datetime(2026, 12, 2, 11, 36, 46),
    )
    assert statement.unpack([(",",)]) == (None, None)  # a killed statement's NULLs
    for rows in (
        [("=1",)],  # a value missing
        [("=1,=2,=3",)],  # one too many
        [("1,=2026-12-02 11:36:46",)],  # no marker
        [("=x,=2026-12-02 11:36:46",)],  # not a number
        [(None,)],
        [("=1,=2026-12-02 11:36:46", 2)],
        [],
        [(b"=1,\xff",)],
    ):
        assert statement.unpack(rows) is None, rows
    statement.forget()
    assert statement.packed is None


def test_the_round_packs_its_statement_from_the_second_on(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """The first round learns the types from its statement in columns; the next sends it
    packed, and reports the same queue."""
    _a_store_in_every_state(store)
    config = dataclasses.replace(site(), anomalies_interval=0.0)
    session = RecordingSession(config)
    monitored = MonitoredSite(config, sources=site_sources(config).without_heavy(), session=session)
    rounds = []
    try:
        for _ in range(3):
            session.statements.clear()
            reports = monitored.run(Deadline(time.monotonic() + 30, time.monotonic))
            (result,) = monitored.finish(reports, Deadline(time.monotonic() + 5, time.monotonic))
            rounds.append((list(session.statements), result))
    finally:
        monitored.close()
    packed = [sql for sql, _ in rounds[2][0] if sql.startswith("SELECT CONCAT_WS(")]
    assert len(packed) == 1, rounds[2][0]
    for _, result in rounds:
        assert result.up, result.problems
    counts = ("actionscheduler_due_actions", "actionscheduler_in_progress_actions")
    for family in (*counts, "actionscheduler_undated_pending_actions"):
        in_columns, packed_too = (
            sorted((s.labels, s.value) for s in result.samples if s.metric.name == family)
            for _, result in (rounds[0], rounds[2])
        )
        assert in_columns and in_columns == packed_too, family
