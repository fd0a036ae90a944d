"""The hot tier reads index ranges bounded by the queue, not by the table.

Two generated stores with the same due backlog and running batch, one four times the
other, must cost every hot-tier statement the same number of rows read (the server's own
handler counters), and no statement may scan the actions or logs table.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actionscheduler_exporter.collectors import recurring
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.sources.database import DatabaseContext
from actionscheduler_exporter.totals.ledger import ActionLedger
from testbed import hot_sql, schedules
from testbed.generate import PREFIX, generate
from testbed.mariadb import Server
from testbed.rows_read import session_entries_examined, session_rows_read
from testbed.store import ActionSchedulerStore
from testbed.store_profile import StoreProfile

DUE = 400
SMALL, LARGE = 10_000, 40_000


def shape(sql: str) -> str:
    """The statement without its tables' database and with its id lists folded."""
    return re.sub(r"IN \((?:%s, )*%s\)", "IN (...)", re.sub(r"`(?:[^`]|``)*`\.", "", sql))


def rows_per_statement(server: Server, database: str) -> list[dict[str, Any]]:
    with server.connect(database) as connection:
        return hot_sql.explain(
            connection, hot_sql.hot_statements(hot_sql.store_site(server, database))
        )


@pytest.fixture(scope="module")
def stores(mariadb: Server) -> Iterator[dict[int, str]]:
    run = secrets.token_hex(3)  # another test run may share the server
    names = {size: f"as_plans_{run}_{size}" for size in (SMALL, LARGE)}
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
    # Lookups of group slugs list as many ids as the backlog has groups.
    assert [shape(item["sql"]) for item in small] == [shape(item["sql"]) for item in large]
    for in_small, in_large in zip(small, large, strict=True):
        sql, rows = in_large["sql"], in_large["rows_examined"]
        # The due backlog and the running batch are the same in both stores.
        # (a few rows apart: the stores' random groups and hooks make a few more pairs)
        assert rows <= 1.02 * in_small["rows_examined"] + 10, f"grows with the table: {sql}"
        # The split by group reads each due row (no index holds the group), through a
        # derived table: written once and read once more.
        per_due = 4 if "AS oldest" in sql else 2
        assert rows <= per_due * (DUE + StoreProfile.batch_size) + 50, f"reads too much: {sql}"


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


def heavy_rows_per_statement(server_site: SiteConfig) -> tuple[list[int], list[int]]:
    """Rows read by each statement of a first walk and of the walk after it (the session's
    own handler counters, less what reading them costs)."""
    session = Session(server_site)
    read: list[int] = []
    overhead = session_rows_read(session)
    overhead = session_rows_read(session) - overhead
    last = session_rows_read(session)

    def after_statement(_: float) -> None:
        nonlocal last
        read.append(session_rows_read(session) - last - overhead)
        last = session_rows_read(session)

    ledger = ActionLedger(HEAVY_CHUNK, sleep=after_statement)
    try:
        ledger.refresh(session, TableNames(PREFIX))
        first = list(read)
        ledger.refresh(session, TableNames(PREFIX))
        ledger.refresh(session, TableNames(PREFIX))
    finally:
        session.close()
    return first, read[len(first) :]


HEAVY_CHUNK = 2000


def test_heavy_statements_read_a_chunk_at_most_at_four_times_the_table(
    mariadb: Server, stores: dict[int, str], site: Callable[..., SiteConfig]
) -> None:
    """The heavy tier's walk: every statement reads a bounded multiple of a chunk's rows
    (the rows, then each again in the grouping's temporary table; a chunk with open actions
    is read once more for their ids), however large the table: more chunks, not longer
    ones."""
    walks = {
        size: heavy_rows_per_statement(site(database=database, table_prefix=PREFIX))
        for size, database in stores.items()
    }
    for first, later in walks.values():
        assert max(first) <= 3 * HEAVY_CHUNK + 100, first
        assert max(later) <= 3 * HEAVY_CHUNK + 100, later
    (small_first, _), (large_first, _) = walks[SMALL], walks[LARGE]
    assert max(large_first) <= max(small_first) + 100
    assert len(large_first) > 3 * len(small_first) - 10


def test_a_quiet_table_costs_index_entries_not_rows(
    mariadb: Server, stores: dict[int, str], site: Callable[..., SiteConfig]
) -> None:
    """Once counted, a walk of an unchanged table reads the group index: one entry per
    action and a lookup per group and chunk, plus the open actions' index entries, in
    pages (each entry read, then its row of the page)."""
    first, later = heavy_rows_per_statement(site(database=stores[LARGE], table_prefix=PREFIX))
    checks = later[len(later) // 2 :]  # the third walk: every chunk only checked
    with mariadb.connect(stores[LARGE]) as connection, connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {PREFIX}actionscheduler_actions"
            " WHERE status NOT IN ('complete', 'failed', 'canceled')"
        )
        (open_actions,) = cursor.fetchone()
    assert sum(checks) <= 1.1 * (LARGE + 2 * open_actions), checks
    assert sum(checks) < 0.6 * sum(first), (sum(checks), sum(first))


def recurring_rows_read(site: SiteConfig, prefix: str = PREFIX) -> tuple[int, int]:
    """Rows read by the stopped-recurring statements for every hook with failed actions,
    and how many hooks that is."""
    session = Session(site)
    try:
        hooks = [
            str(row[0])
            for row in session.query(
                f"SELECT DISTINCT hook FROM {prefix}actionscheduler_actions WHERE status = 'failed'"
            )
        ]
        context = DatabaseContext(session, TableNames(prefix), site, {})
        before = session_entries_examined(session)
        overhead = session_entries_examined(session) - before
        before = session_entries_examined(session)
        list(recurring.stopped_hooks(context, hooks))
        return session_entries_examined(session) - before - overhead, len(hooks)
    finally:
        session.close()


def test_stopped_recurring_hooks_cost_a_few_index_entries_per_hook(
    mariadb: Server, stores: dict[int, str], site: Callable[..., SiteConfig]
) -> None:
    """The heavy tier's recurring check reads each hook's newest actions per status from
    the (hook, status, scheduled date) index: a few rows per hook, the same at four times
    the table."""
    read = {
        size: recurring_rows_read(site(database=database, table_prefix=PREFIX))
        for size, database in stores.items()
    }
    (small, small_hooks), (large, large_hooks) = read[SMALL], read[LARGE]
    assert small_hooks > 3 and large_hooks > 3  # (the rarest hooks differ between stores)
    # about a dozen probes per hook, each an entry or a few and its row (the hook is a
    # prefix of the index: the row says whether it is the hook), the entries the index
    # conditions rejected included, and the log rows of its latest failure: not its rows
    # (the statement of 2b3dd16 read 9,780 and 39,129 here: 4 times as many)
    assert large <= 80 * large_hooks, read
    assert large / large_hooks <= 1.5 * small / small_hooks, read


BUSY_HOOK = "woocommerce_deliver_webhook_async"
BUSY_COMPLETE = 60_000
BUSY_OTHERS = 60_000


def test_a_hook_with_many_complete_rows_costs_its_probes_not_its_rows(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """A recurring hook with tens of thousands of complete runs and a failed latest one
    (the statement the issue timed at 1.8 s with 2.5M such rows): each probe is a range
    of one (hook, status) of the index, so the check reads a few dozen index entries and
    log rows, not the hook's complete entries. Counted on the exporter's own connection."""
    schedule = schedules.serialized(schedules.INTERVAL, store.now(), 60)
    store._execute(
        f"INSERT INTO {store.actions} (hook, status, scheduled_date_gmt, scheduled_date_local,"
        " args, schedule, attempts, last_attempt_gmt, last_attempt_local)"
        " SELECT %s, 'complete', %s - INTERVAL seq MINUTE, %s - INTERVAL seq MINUTE, '[]', %s,"
        f" 1, %s - INTERVAL seq MINUTE, %s - INTERVAL seq MINUTE FROM seq_1_to_{BUSY_COMPLETE}",
        (BUSY_HOOK, store.now(), store.now(), schedule, store.now(), store.now()),
    )
    # other hooks' older work, half of it pending: the status index is no cheaper way in,
    # and MariaDB takes the hook part of the (hook, status, date) index for `status IN`
    store._execute(
        f"INSERT INTO {store.actions} (hook, status, scheduled_date_gmt, args, schedule)"
        " SELECT CONCAT('other_', MOD(seq, 50)), IF(MOD(seq, 2), 'pending', 'complete'),"
        f" %s - INTERVAL {BUSY_COMPLETE} + seq MINUTE, '[]', '' FROM seq_1_to_{BUSY_OTHERS}",
        (store.now(),),
    )
    # a failed run of it and of another hook (a batch of hooks is judged by one
    # statement, the hook a correlated value), each below the threshold: rescheduled, and
    # the next occurrence unscheduled and purged
    for hook in (BUSY_HOOK, "other_1"):
        failed = store.create(hook, schedule=schedules.INTERVAL, recurrence=60)
        store.start(failed)
        store.fail(failed, "Supplier API unreachable")
    store._execute(f"ANALYZE TABLE {store.actions}")
    read, hooks = recurring_rows_read(site(table_prefix="wp_"), "wp_")
    assert hooks == 2
    assert read <= 40 * hooks, read  # the statement of 2b3dd16 read 60,035
