"""The round's statement answered in one column (`db.packed`), on a real MariaDB: the
values are the ones the same statement gives in columns, for every hot collector's
subqueries on a store in every state they read, and for the types a subquery may have;
what cannot be packed stays in columns, and so does a statement whose packed answer
could not be read once; the types learnt from one database are not used for another; the
round packs once a statement without the tables' statistics has been answered in
columns, and its samples do not change for it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from decimal import Decimal

from pymysql.constants import FIELD_TYPE

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.db.packed import Endpoint, PackedStatement
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.rounds.hot_statement import read_hot_statement
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.sources.database import Columns, DatabaseContext
from actionscheduler_exporter.sources.statement_parts import statement_of
from actionscheduler_exporter.timing import Deadline
from testbed.hot_sql import RecordingSession
from testbed.store import ActionSchedulerStore
from tests.support.fake_session import together_parts
from tests.support.scenarios import healthy_flow

# Types a scalar subquery may have that are packed, NULL among them.
_TYPED = (
    "SELECT 7",
    "SELECT CAST(3 AS SIGNED)",
    "SELECT CAST(3 AS UNSIGNED)",
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


def _hot_columns(site: SiteConfig, session: Session) -> dict[str, Columns]:
    """The columns of every hot collector of the site, by its name, in the round's order."""
    context = DatabaseContext(session, TableNames(site.table_prefix), site, {})
    found = {c.name: c.columns(context) for c in site_sources(site).without_heavy().in_round}
    return {name: columns for name, columns in found.items() if columns is not None}


def _both_ways(session: Session, statement: PackedStatement) -> tuple[object, ...]:
    rows, types = session.query_typed(statement.sql, statement.args)
    statement.learn(session.endpoint, types)
    packed_sql = statement.packed(session.endpoint)
    assert packed_sql is not None, types
    packed = statement.unpack(session.endpoint, session.query(packed_sql, statement.args))
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
        every = _hot_columns(config, session)
        assert sum(columns.width for columns in every.values()) >= 9
        _both_ways(session, statement_of(list(every.values())))
        read = _as_the_round_reads(config, session, every)  # each collector's, split
        for name, columns in every.items():
            assert not columns.problem(read[name]), name
        assert isinstance(read["due"][0], int) and read["due"][0] >= 1
        # something is due: the comparison is not of zeros alone
    finally:
        session.close()


def test_a_subquery_of_several_values_gives_what_its_values_give_one_subquery_each(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """Each hot collector's subqueries of several values (`values_together`) against the
    same values read one subquery each, in one statement (one clock for the ages), on a
    store where something is due, claimed, running and zero-dated; in ORACLE mode too,
    where CONCAT keeps what a NULL would have dropped."""
    _a_store_in_every_state(store)
    config = site()
    session = Session(config, check_grants=False)
    try:
        grouped = {n: c for n, c in _hot_columns(config, session).items() if c.widths}
        assert set(grouped) >= {"due", "in_progress", "claims"}
        for mode in ("", "ORACLE"):
            session.query(f"SET SESSION sql_mode = '{mode}'")
            for name, columns in grouped.items():
                alone, alone_args = _one_value_each(columns)
                both = Columns((*columns.subqueries, *alone), (*columns.args, *alone_args))
                answer = session.query(*both.statement())[0]
                together = columns.values(answer[: len(columns.subqueries)])
                assert together is not None, (name, mode)
                assert together == answer[len(columns.subqueries) :], (name, mode)
                assert not columns.problem(together), name
        due = grouped["due"].values(session.query(*grouped["due"].statement())[0])
        assert due is not None and due[0] >= 1
    finally:
        session.close()


def _as_the_round_reads(
    config: SiteConfig, session: Session, every: dict[str, Columns]
) -> dict[str, tuple[object, ...]]:
    """Each hot collector's values from the round's one statement, split as it splits
    them (`read_hot_statement`, the tables' statistics known)."""
    context = DatabaseContext(session, TableNames(config.table_prefix), config, {})
    collectors = [c for c in site_sources(config).without_heavy().in_round if c.name in every]
    statement = read_hot_statement(context, collectors, {})
    assert statement.prefetched.keys() == every.keys()
    return {name: tuple(values) for name, values in statement.prefetched.items()}


def test_the_claimed_open_actions_are_read_once_for_the_due_and_claims_collectors(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """The claimed due actions (due's) and the active claims (claims') come from one pass
    over the claim index, sent once in the round's statement (`collectors.claimed`): each
    gives what the statement of one value did before, on a store with claimed due,
    claimed running and claimed actions not due yet (a claim is staked on due actions; a
    DBA may move one's date), an unclaimed due one and a second claim."""
    _a_store_in_every_state(store)
    second = store.stake_claim(batch_size=2)
    with store.connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {store.actions} SET scheduled_date_gmt = UTC_TIMESTAMP() + INTERVAL 1 DAY"
            " WHERE action_id = %s",
            (second.action_ids[0],),
        )
    config = site()
    session = Session(config, check_grants=False)
    try:
        every = _hot_columns(config, session)
        statement = statement_of(list(every.values()))
        shared = [q for q in statement.subqueries if "COUNT(DISTINCT claim_id)" in q]
        assert len(shared) == 1
        assert statement.width == sum(len(c.subqueries) for c in every.values()) - 1
        ((claimed_due, active),) = session.query(
            f"SELECT (SELECT COUNT(*) FROM {store.actions} WHERE claim_id > 0"
            " AND status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP()),"
            f" (SELECT COUNT(DISTINCT claim_id) FROM {store.actions}"
            " WHERE claim_id != 0 AND status IN ('pending', 'in-progress'))"
        )
        read = _as_the_round_reads(config, session, every)
    finally:
        session.close()
    # The second claim's other action; the first claim's runs: two claims.
    assert (claimed_due, active) == (1, 2)
    assert read["due"][2] == claimed_due and read["claims"][1] == active
    assert read["due"][2:4] == read["claims"][0:2]


def _one_value_each(columns: Columns) -> tuple[list[str], list[object]]:
    """The columns' subqueries with one value each, and their arguments, in order."""
    queries: list[str] = []
    args: list[object] = []
    remaining = list(columns.args)
    for subquery in columns.subqueries:
        for part in together_parts(subquery) or [subquery]:
            count = part.count("%s")
            queries.append(part)
            args += remaining[:count]
            remaining = remaining[count:]
    return queries, args


def test_every_packed_type_and_null_comes_back_as_the_driver_makes_it(
    site: Callable[..., SiteConfig],
) -> None:
    session = Session(site(), check_grants=False)
    try:
        values = _both_ways(session, PackedStatement(_TYPED, ()))
    finally:
        session.close()
    assert values[4] == 18446744073709551615
    assert values[5] == Decimal("2.500")
    assert values[9] == dt.datetime(2026, 12, 2, 11, 36, 46, 250000)
    assert values[11] is None and values[12] is None


def test_a_statement_with_a_text_column_stays_in_columns(
    site: Callable[..., SiteConfig],
) -> None:
    session = Session(site(), check_grants=False)
    try:
        statement = PackedStatement(("SELECT 1", "SELECT 'a,b'"), ())
        rows, types = session.query_typed(statement.sql, statement.args)
        statement.learn(session.endpoint, types)
    finally:
        session.close()
    assert rows == [(1, "a,b")]
    assert statement.packed(session.endpoint) is None


def test_a_server_mode_that_keeps_null_in_concat_sends_it_back_to_columns(
    site: Callable[..., SiteConfig],
) -> None:
    """MariaDB's Oracle mode makes CONCAT('=', NULL) '=': such an answer is not read, and
    the statement is sent in columns from then on, where the NULL is a NULL."""
    session = Session(site(), check_grants=False)
    try:
        session.query("SET SESSION sql_mode = 'ORACLE'")
        statement = PackedStatement(("SELECT 1", "SELECT MAX(1) FROM DUAL WHERE 1 = 0"), ())
        rows, types = session.query_typed(statement.sql, statement.args)
        statement.learn(session.endpoint, types)
        packed_sql = statement.packed(session.endpoint)
        assert packed_sql is not None
        packed = statement.unpack(session.endpoint, session.query(packed_sql, statement.args))
        assert packed is None
        assert statement.packed(session.endpoint) is None
        statement.learn(session.endpoint, types)  # learnt again: still not packed
        assert statement.packed(session.endpoint) is None
    finally:
        session.close()
    assert rows == [(1, None)]


_HERE: Endpoint = ("db", 3306, "", "shop")
_THERE: Endpoint = ("db", 3306, "", "other_shop")


def test_an_answer_that_cannot_be_a_packed_one_is_not_used() -> None:
    """Not used, and the statement is no longer packed for that database (only)."""
    longlong, datetime = FIELD_TYPE.LONGLONG, FIELD_TYPE.DATETIME
    for rows in (
        [("=1",)],  # a value missing
        [("=1,=2,=3",)],  # one too many
        [("1,=2026-12-02 11:36:46",)],  # no marker
        [("=,=2026-12-02 11:36:46",)],  # a NULL that CONCAT kept
        [("=x,=2026-12-02 11:36:46",)],  # not a number
        [("=1,=5",)],  # not a date: the driver's converter raises a TypeError
        [(None,)],
        [("=1,=2026-12-02 11:36:46", 2)],
        [],
        [(b"=1,\xff",)],
    ):
        statement = PackedStatement(("SELECT 1", "SELECT NOW()"), ())
        for endpoint in (_HERE, _THERE):
            statement.learn(endpoint, (longlong, datetime))
        assert statement.unpack(_HERE, [(",",)]) == (None, None)  # a killed statement's
        assert statement.unpack(_HERE, rows) is None, rows
        assert statement.packed(_HERE) is None
        assert statement.unpack(_THERE, [("=1,=2026-12-02 11:36:46",)]) == (
            1,
            dt.datetime(2026, 12, 2, 11, 36, 46),
        )


def test_types_are_learnt_per_database_and_float_is_not_packed() -> None:
    statement = PackedStatement(("SELECT 1",), ())
    statement.learn(_HERE, (FIELD_TYPE.LONGLONG,))
    assert statement.packed(_HERE) is not None
    assert statement.packed(_THERE) is None
    floating = PackedStatement(("SELECT 1",), ())
    floating.learn(_HERE, (FIELD_TYPE.FLOAT,))
    assert floating.packed(_HERE) is None


def test_the_round_packs_its_statement_from_the_second_on(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """The first round's statement carries the tables' statistics (a text: not packed),
    the second learns the types in columns, the third sends it packed and reports the
    same queue as the first."""
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
