"""Several stores' statements as one (`db.union`): what the server receives is what the
driver would have written of each store's statement and arguments."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pymysql.converters import escape_item

from actionscheduler_exporter.collectors.claims import ClaimsCollector
from actionscheduler_exporter.collectors.due import DueCollector
from actionscheduler_exporter.collectors.in_progress import InProgressCollector
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.packed import PackedStatement, in_columns
from actionscheduler_exporter.db.schema import SITE_DATABASE, TableNames, in_database
from actionscheduler_exporter.db.union import Member, union_statement
from actionscheduler_exporter.sources.database import DatabaseContext
from actionscheduler_exporter.sources.statement_parts import statement_of
from tests.support.fake_session import FakeSession, Script

_MARIADB = "10.11.19-MariaDB"


def _as_sent(sql: str, args: tuple[object, ...], database: str = "") -> str:
    """The text the server receives: the marks of the session's database replaced, then
    formatted by the driver with its escaping of each argument, as `Session` sends it."""
    sql, sent = in_database(sql, args, database)
    return sql % tuple(escape_item(arg, "utf8mb4") for arg in sent or ())


def _each_escaped(members: list[Member]) -> str:
    """The union as it was written before its arguments were written in: each branch's
    arguments escaped by the driver."""
    branches = []
    for place, (statement, database) in enumerate(members):
        columns = in_columns(statement.subqueries).removeprefix("SELECT ")
        branches.append(_as_sent(f"SELECT {place}, {columns}", statement.args, database))
    return "SET STATEMENT lock_wait_timeout = 1 FOR " + " UNION ALL ".join(branches)


def test_the_hot_statements_dates_are_written_in_as_the_driver_writes_them() -> None:
    """Issue 40: the driver escaped each store's three date arguments at every batch;
    they are written in the branch's text once, the same text."""
    collectors = (DueCollector(), ClaimsCollector(), InProgressCollector())
    site = SiteConfig(name="shop", database="wp")
    context = DatabaseContext(FakeSession(site, Script()), TableNames("wp_"), site, {})
    statement = statement_of([collector.columns(context) for collector in collectors])
    assert statement.args and all(type(arg) is str for arg in statement.args)
    members = [(statement, f"shop_{n}") for n in range(3)]
    sql, args = union_statement(_MARIADB, members)
    assert args == ()
    assert _as_sent(sql, args) == _each_escaped(members)


_ARGUMENT = st.one_of(
    st.integers(),
    st.sampled_from(["1000-01-01 00:00:00", "2026-12-07", "12:30:00.5", "", "-1"]),
    st.text(max_size=8),  # quotes, backslashes, per cent signs: left to the driver
    st.just(SITE_DATABASE),
)


@given(st.lists(st.lists(_ARGUMENT, max_size=4), min_size=1, max_size=3), st.booleans())
def test_any_arguments_reach_the_server_as_the_driver_writes_them(
    branches: list[list[object]], literal_per_cent: bool
) -> None:
    per_cent = " LIKE '%%x'" if literal_per_cent else ""
    members: list[Member] = []
    for place, given_args in enumerate(branches):
        subqueries = [f"SELECT %s{per_cent}" for _ in given_args] or ["SELECT 1"]
        members.append((PackedStatement(subqueries, tuple(given_args)), f"db{place}"))
    sql, args = union_statement(_MARIADB, members)
    assert _as_sent(sql, args) == _each_escaped(members)


def test_a_statement_whose_placeholders_do_not_take_its_arguments_is_sent_as_it_is() -> None:
    statement = PackedStatement(["SELECT %s", "SELECT %s"], (1,))
    assert statement.branch(0) == ("SELECT 0, (SELECT %s) AS c0, (SELECT %s) AS c1", (1,))
