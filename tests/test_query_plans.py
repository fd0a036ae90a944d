"""The hot tier reads index ranges bounded by the queue, not by the table.

Two generated stores with the same due backlog and running batch, one four times the
other, must cost every hot-tier statement the same number of rows read (the server's own
handler counters), and no statement may scan the actions or logs table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench import hot_sql
from bench.generate import PREFIX, generate
from bench.measure import session_rows_read
from bench.profile import StoreProfile
from exporter.collectors import default_collectors
from exporter.collectors.context import DatabaseContext
from exporter.config.model import SiteConfig
from exporter.db.session import Session
from exporter.db.tables import TableNames
from testbed.mariadb import Server

DUE = 400
SMALL, LARGE = 10_000, 40_000


def rows_per_statement(server: Server, database: str) -> list[dict[str, Any]]:
    with server.connect(database) as connection:
        return hot_sql.explain(
            connection, hot_sql.hot_statements(hot_sql.store_site(server, database))
        )


@pytest.fixture(scope="module")
def stores(mariadb: Server) -> Iterator[dict[int, str]]:
    names = {size: f"as_plans_{size}" for size in (SMALL, LARGE)}
    with mariadb.connect(local_infile=True) as connection:
        for size, name in names.items():
            generate(connection, StoreProfile(size, due=DUE), database=name)
    yield names
    with mariadb.connect() as connection, connection.cursor() as cursor:
        for name in names.values():
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


def test_hot_statements_read_as_many_rows_at_four_times_the_table(
    mariadb: Server, stores: dict[int, str]
) -> None:
    small = rows_per_statement(mariadb, stores[SMALL])
    large = rows_per_statement(mariadb, stores[LARGE])
    assert [item["sql"] for item in small] == [item["sql"] for item in large]
    for in_small, in_large in zip(small, large, strict=True):
        sql, rows = in_large["sql"], in_large["rows_examined"]
        # The due backlog and the running batch are the same in both stores.
        assert rows <= in_small["rows_examined"] + 10, f"grows with the table: {sql}"
        assert rows <= 2 * (DUE + StoreProfile.batch_size) + 50, f"reads too much: {sql}"


def test_no_hot_statement_scans_a_big_table(mariadb: Server, stores: dict[int, str]) -> None:
    big_tables = {f"{PREFIX}actionscheduler_actions", f"{PREFIX}actionscheduler_logs"}
    for explained in rows_per_statement(mariadb, stores[LARGE]):
        sql = explained["sql"]
        for plan in explained["plan"]:
            if plan["table"] in big_tables or plan["table"] in ("a", "l"):
                assert plan["type"] in ("range", "ref", "eq_ref", "index_subquery", "const"), (
                    f"{plan['type']} read of {plan['table']}: {sql}"
                )
                assert plan["key"], f"no index used: {sql}"


def test_heavy_statements_do_grow_with_the_table(
    mariadb: Server, stores: dict[int, str], site: Callable[..., SiteConfig]
) -> None:
    """The counter-test: what the heavy tier reads is proportional to the store, which is
    why it is refreshed in the background instead of on every scrape."""
    heavy = [c for c in default_collectors() if c.tier == "heavy"]
    examined = {}
    for size, database in stores.items():
        config = site(database=database, table_prefix=PREFIX)
        session = Session(config)
        context = DatabaseContext(session, TableNames(PREFIX), config, {})
        # The session's own handler counters: another client of the server adds nothing.
        before = session_rows_read(session)
        for collector in heavy:
            list(collector.read(context))
        examined[size] = session_rows_read(session) - before
        session.close()
    assert examined[LARGE] > 3 * examined[SMALL]
