"""The heavy tier's chunked totals (totals/ledger.py): exact against the ground truth while
the queue moves, during a walk too; most chunks only checked; a late insert, an emptied
table and a table refilled with the same ids counted right."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from actionscheduler_exporter import check
from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.db.schema import STATUSES, TableNames
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.totals import ledger
from actionscheduler_exporter.totals.ledger import ActionLedger, Totals
from testbed import as4
from testbed.store import ActionSchedulerStore
from tests.support import truth
from tests.support.scenarios import assert_matches

CHUNK = 10  # ids per chunk: a few hundred actions make dozens of chunks
DAY = 86400
HOOKS = [
    ("woocommerce_deliver_webhook_async", "woocommerce-webhooks"),
    ("wc_admin_import_orders", "wc-admin-data"),
    ("woocommerce_scheduled_subscription_payment", "wcs"),
    ("woocommerce_cleanup_draft_orders", ""),
]


def history(store: ActionSchedulerStore, count: int = 240) -> None:
    """Old finished actions (some past the retention period), then recent and future ones."""
    with store.seconds_ago(40 * DAY):
        _run_some(store, count // 2)
    with store.seconds_ago(2 * DAY):
        _run_some(store, count // 2)
    for index in range(20):  # pending in the future: renewals scheduled among history
        hook, group = HOOKS[index % len(HOOKS)]
        store.create(hook, group=group, args=[index], scheduled=store.now() + dt.timedelta(days=9))


def finished_history(store: ActionSchedulerStore, count: int = 200) -> None:
    """Only finished actions (half past the retention period), then a few pending."""
    for days in (40, 2):
        with store.seconds_ago(days * DAY):
            for index in range(count // 2):
                hook, group = HOOKS[index % len(HOOKS)]
                action_id = store.create(hook, group=group, args=[index])
                store.start(action_id)
                store.complete(action_id)
    for index in range(5):
        store.create(HOOKS[0][0], group=HOOKS[0][1], args=[index])


def _run_some(store: ActionSchedulerStore, count: int) -> None:
    ids = []
    for index in range(count):
        hook, group = HOOKS[index % len(HOOKS)]
        ids.append(store.create(hook, group=group, args=[index]))
    for index, action_id in enumerate(ids):
        if index % 7 == 0:
            store.cancel(action_id)
        elif index % 5 == 0:
            store.start(action_id)
            store.fail(action_id, "Supplier API unreachable")
        elif index % 3:
            store.start(action_id)
            store.complete(action_id)
    # the rest stays pending (due)


@pytest.fixture
def chunked_site(site: Callable[..., SiteConfig]) -> SiteConfig:
    # Every chunk checked at every walk: every change counted by the next one; the due
    # split too (it is compared with the truth at every scrape of one coordinator).
    return site(
        heavy_interval=0,
        heavy_chunk_rows=CHUNK,
        heavy_settled_check_every=1,
        due_split_interval=0,
    )


@pytest.fixture
def coordinator(chunked_site: SiteConfig) -> Iterator[Coordinator]:
    coordinator = Coordinator(ExporterConfig(sites=(chunked_site,)))
    yield coordinator
    coordinator.close()


@pytest.fixture
def session(chunked_site: SiteConfig) -> Iterator[Session]:
    session = Session(chunked_site)
    yield session
    session.close()


def check_scrape(coordinator: Coordinator, connection: pymysql.connections.Connection[Any]) -> None:
    (result,) = coordinator.scrape(10.0)
    assert_matches(result, truth.compute(connection))


@pytest.mark.parametrize("page_rows", [ledger.OPEN_PAGE_ROWS, 3])
def test_chunked_totals_equal_the_truth_as_the_queue_moves(
    store: ActionSchedulerStore,
    coordinator: Coordinator,
    connect: Callable[[], pymysql.connections.Connection[Any]],
    monkeypatch: pytest.MonkeyPatch,
    page_rows: int,
) -> None:
    """Also with the open actions read in pages of 3 index entries: many of them share a
    scheduled date, so the pages end inside a date (the key is the date and the id)."""
    monkeypatch.setattr(ledger, "OPEN_PAGE_ROWS", page_rows)
    history(store)
    connection = connect()
    check_scrape(coordinator, connection)  # every chunk counted
    check_scrape(coordinator, connection)  # most only checked

    store.run_batch(25)  # claims, starts and completes due actions across old chunks
    check_scrape(coordinator, connection)

    claim = store.kill_worker_mid_batch(batch_size=10, finished=2)
    with store.seconds_ago(-400):  # the cleaner, after the failure and timeout periods
        store.cleaner_mark_failed()
        store.cleaner_reset()
    check_scrape(coordinator, connection)

    assert store.purge() > 0  # deletes finished actions in the oldest chunks
    check_scrape(coordinator, connection)

    future = store.create(HOOKS[0][0], group=HOOKS[0][1], scheduled=store.now())
    store.cancel(future)
    for index in range(30):
        store.create(HOOKS[1][0], group="a-new-group", args=[index])
    check_scrape(coordinator, connection)
    store.release_claim(claim.claim_id)
    check_scrape(coordinator, connection)


def test_a_quiet_table_is_checked_not_recounted(
    store: ActionSchedulerStore,
    session: Session,
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    history(store)
    ledger = ActionLedger(CHUNK)
    tables = TableNames("wp_")
    first = ledger.refresh(session, tables)
    assert first.recounted == first.chunks > 20
    # The next walk recounts only the chunk(s) within a chunk of the highest id.
    second = ledger.refresh(session, tables)
    assert 0 < second.recounted <= 2
    quiet = ledger.refresh(session, tables)
    # Only the last chunk, which new actions go into, is read again.
    assert quiet.recounted == 1 and quiet.checked == quiet.chunks - 1
    assert quiet.by_status_group == first.by_status_group

    # Chunks holding a few future actions are checked by id; one of them moves on.
    with connect().cursor() as cursor:
        cursor.execute(f"SELECT MIN(action_id) FROM {store.actions} WHERE status = 'pending'")
        (future_id,) = cursor.fetchone()
    store.start(future_id)
    store.complete(future_id)
    moved = ledger.refresh(session, tables)
    assert moved.recounted == 2
    assert moved.by_status_group != first.by_status_group

    store.purge()  # old chunks lose rows: each is recounted once, then only checked
    purged = ledger.refresh(session, tables)
    assert 0 < purged.recounted < purged.chunks
    again = ledger.refresh(session, tables)
    assert again.recounted == 1


def test_a_4x_purge_of_failed_actions_is_followed_within_one_refresh(
    store: ActionSchedulerStore,
    coordinator: Coordinator,
    session: Session,
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    """Action Scheduler 4.x's daily cleanup deletes failed actions past their three months
    (with the complete and canceled ones past 31 days): the totals by status, the failed
    actions per hook and check's FAILED-KEPT follow at the next refresh, and only the
    chunks that lost rows are read again (a purge, not a recount of the table)."""
    with store.seconds_ago(100 * DAY):
        _run_some(store, 120)  # failed, complete and canceled: all past their retention
    with store.seconds_ago(10 * DAY):  # runs the table keeps, failures among them
        for index in range(120):
            hook, group = HOOKS[index % len(HOOKS)]
            action_id = store.create(hook, group=group, args=[index])
            store.start(action_id)
            if index % 5:
                store.complete(action_id)
            else:
                store.fail(action_id, "Supplier API unreachable")
    connection = connect()
    check_scrape(coordinator, connection)
    ledger = ActionLedger(CHUNK)
    tables = TableNames("wp_")
    ledger.refresh(session, tables)
    before = ledger.refresh(session, tables)
    failed_before = sum(truth.compute(connection).failed_by_hook.values())

    deleted, _ = as4.delete_old_actions(store, task=as4.CLEANUP_HOOK)
    assert deleted
    connection = connect()
    expected = truth.compute(connection)
    assert 0 < sum(expected.failed_by_hook.values()) < failed_before
    (result,) = coordinator.scrape(10.0)
    assert_matches(result, expected)
    header, line = check.report([result]).splitlines()[:2]  # the site table comes first
    assert header.split()[-1] == "FAILED-KEPT"
    assert line.split()[-1] == str(expected.statuses["failed"])

    purged = ledger.refresh(session, tables)
    touched = {action_id // CHUNK for action_id in deleted}
    assert purged.by_status_group == _by_status_group(connection)
    assert sum(purged.failed_by_hook.values()) == expected.statuses["failed"]
    # The chunks that lost rows (and the newest one) are read again; the rest are checked.
    assert purged.recounted <= len(touched) + 1 < before.chunks
    assert ledger.refresh(session, tables).recounted == 1


def _by_status_group(connection: pymysql.connections.Connection[Any]) -> Counter[Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT status, group_id, COUNT(*) FROM wp_actionscheduler_actions GROUP BY 1, 2"
        )
        return Counter(
            {(status, int(group)): int(count) for status, group, count in cursor.fetchall()}
        )


def test_settled_chunks_are_checked_in_turns(
    store: ActionSchedulerStore,
    session: Session,
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    """With settled_check_every 3, a chunk of finished actions only is checked at every
    third walk: a purge in it shows within three walks, and is then exact."""
    finished_history(store)
    tables = TableNames("wp_")
    ledger = ActionLedger(CHUNK, settled_check_every=3)
    for _ in range(3):
        ledger.refresh(session, tables)
    quiet = [ledger.refresh(session, tables) for _ in range(3)]
    # Each walk leaves about two thirds of the settled chunks for another turn, and the
    # three walks between them check each once.
    for walk in quiet:
        assert 0 < walk.skipped < walk.chunks and walk.recounted <= 1
    assert sum(walk.skipped for walk in quiet) % 2 == 0

    assert store.purge() > 0  # the oldest chunks lose rows
    first = ledger.refresh(session, tables)
    expected = truth.compute(connect())
    assert sum(first.by_status_group.values()) > sum(expected.statuses.values())  # not yet
    ledger.refresh(session, tables)
    assert_totals(ledger.refresh(session, tables), expected)  # within three walks


def test_changes_during_a_walk_are_counted_by_the_next(
    store: ActionSchedulerStore,
    session: Session,
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    history(store)
    tables = TableNames("wp_")

    statements: list[int] = []  # counted once the walk under test starts

    def meanwhile(_: float) -> None:
        if statements:
            statements.append(len(statements))
        if len(statements) == 5:  # behind the walk (an old chunk) and ahead of it (new rows)
            store.purge()
            store.run_batch(10)  # completions
            store.run_batch(5, outcome=lambda hook: "Supplier API unreachable")  # failures
            store.create(HOOKS[2][0], group=HOOKS[2][1])

    ledger = ActionLedger(CHUNK, sleep=meanwhile)
    ledger.refresh(session, tables)
    ledger.refresh(session, tables)
    statements.append(0)
    during = ledger.refresh(session, tables)
    assert len(statements) > 5 and during.checked  # the changes came in mid-walk
    assert_totals(ledger.refresh(session, tables), truth.compute(connect()))


def test_an_insert_that_commits_late_is_counted(
    store: ActionSchedulerStore,
    session: Session,
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    """Its id was handed out before the walk that saw the higher ids; it commits before the
    next walk (a transaction shorter than heavy_interval, as Action Scheduler's inserts)."""
    history(store)
    tables = TableNames("wp_")
    ledger = ActionLedger(CHUNK)
    slow = connect()
    slow.autocommit(False)
    with slow.cursor() as cursor:  # takes an id, commits after others' higher ids
        cursor.execute(
            f"INSERT INTO {store.actions} (hook, status, scheduled_date_gmt,"
            " scheduled_date_local, args, group_id) VALUES"
            " ('late_hook', 'failed', UTC_TIMESTAMP(), NOW(), '[]', 0)"
        )
    for index in range(3 * CHUNK):
        store.create(HOOKS[3][0], args=[index])
    ledger.refresh(session, tables)
    ledger.refresh(session, tables)  # ids handed out before the first: checks from now on
    slow.commit()
    for _ in range(3):
        totals = ledger.refresh(session, tables)
    assert_totals(totals, truth.compute(connect()))
    assert totals.failed_by_hook["late_hook"] == 1


def test_a_table_emptied_and_refilled_is_counted_again(
    store: ActionSchedulerStore,
    session: Session,
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    history(store, count=60)
    tables = TableNames("wp_")
    ledger = ActionLedger(CHUNK)
    ledger.refresh(session, tables)
    ledger.refresh(session, tables)
    store.drop_tables()
    store.create_tables()
    empty = ledger.refresh(session, tables)
    assert sum(empty.by_status_group.values()) == 0 and empty.oldest_finished_age is None
    history(store, count=20)  # the same ids again, other rows
    assert_totals(ledger.refresh(session, tables), truth.compute(connect()))


def test_a_purge_of_the_newest_actions_is_not_a_recount(
    store: ActionSchedulerStore,
    session: Session,
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    """A canceled action that never ran is the newest one, and the next cleanup purges it:
    the highest id drops, but no id is handed out again (the table's counter goes on), so
    only the chunks that lost rows are read again, not the whole table."""
    finished_history(store)
    ledger = ActionLedger(CHUNK)
    tables = TableNames("wp_")
    ledger.refresh(session, tables)
    ledger.refresh(session, tables)
    store.cancel(store.create("woocommerce_cancel_unpaid_orders"))
    ledger.refresh(session, tables)
    ledger.refresh(session, tables)
    deleted, _ = as4.delete_old_actions(store, task=as4.CLEANUP_HOOK)
    assert max(deleted) > _max_id(connect())  # the newest action was purged
    purged = ledger.refresh(session, tables)
    touched = {action_id // CHUNK for action_id in deleted}
    # The chunks that lost rows (and the newest) are read again; the others only checked.
    assert purged.recounted <= len(touched) + 1
    assert purged.checked > 0
    assert_totals(purged, truth.compute(connect()))
    store.create(HOOKS[0][0], group=HOOKS[0][1])  # the next id is above the purged one
    assert_totals(ledger.refresh(session, tables), truth.compute(connect()))


def test_a_table_truncated_and_refilled_between_two_walks_is_counted_again(
    store: ActionSchedulerStore,
    session: Session,
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    """Without an empty walk in between: the highest id is lower and the counter started
    again, so the ids were handed out again and every chunk is counted anew."""
    history(store, count=60)
    tables = TableNames("wp_")
    ledger = ActionLedger(CHUNK)
    ledger.refresh(session, tables)
    ledger.refresh(session, tables)
    store._execute(f"TRUNCATE TABLE {store.actions}")
    history(store, count=20)  # the same ids again, other rows
    assert_totals(ledger.refresh(session, tables), truth.compute(connect()))


def _max_id(connection: pymysql.connections.Connection[Any]) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT MAX(action_id) FROM wp_actionscheduler_actions")
        (found,) = cursor.fetchone()
    return int(found)


def test_database_time_is_counted_per_tier(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    history(store, count=60)
    coordinator = Coordinator(ExporterConfig(sites=(site(heavy_chunk_rows=CHUNK),)))
    try:
        spent: list[dict[str, float]] = []
        for _ in range(2):
            (result,) = coordinator.scrape(10.0)
            spent.append(
                {
                    tier: result.value(catalog.DATABASE_SECONDS.name, tier=tier) or 0.0
                    for tier in catalog.TIERS
                }
            )
    finally:
        coordinator.close()
    assert 0 < spent[0]["hot"] < spent[1]["hot"]
    # The first scrape waits for the first refresh; the second starts none.
    assert spent[0]["heavy"] == spent[1]["heavy"] > 0


def assert_totals(totals: Totals, expected: truth.Truth) -> None:
    statuses = {status: 0 for status in STATUSES}
    for (status, _), count in totals.by_status_group.items():
        statuses[status] = statuses.get(status, 0) + count
    assert statuses == dict(expected.statuses)
    assert {hook: n for hook, n in totals.failed_by_hook.items() if n} == dict(
        expected.failed_by_hook
    )
    assert totals.oldest_finished_age == pytest.approx(expected.oldest_finished_age, abs=3)
