"""The heavy tier on a store, side by side in one run: the statements it sent before the
chunked walk (one GROUP BY per collector, exactly what the exporter sent up to 0.6) and
the chunked walk of totals/ledger.py; and the hot scrape while each runs.

Per way: the longest statement, the database time of one refresh and per hour at the
default heavy_interval. For the walk, the first refresh (every chunk counted, once per
exporter start) and a steady one: after an interval's worth of the store's own traffic
(new actions, due ones completed, the cleaner's purge of the oldest), undone afterwards so
the cached store stays as generated.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pymysql

from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, TableNames, placeholders
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.totals.ledger import ActionLedger
from bench.exporters import Running, our_exporter
from bench.measure import heavy_reads
from testbed import hot_sql
from testbed.generate import PREFIX
from testbed.mariadb import Server
from testbed.store_profile import StoreProfile

INTERVAL = 300.0  # the default heavy_interval
RETENTION_DAYS = 31  # the generated history spans the cleaner's default retention
QUIET_SCRAPES = 40
_ACTIONS = f"{PREFIX}actionscheduler_actions"
ONE_STATEMENT = {
    "status": f"SELECT status, group_id, COUNT(*) FROM {_ACTIONS} GROUP BY status, group_id",
    "failures": f"SELECT hook, COUNT(*) FROM {_ACTIONS} WHERE status = 'failed' GROUP BY hook",
    "retention": "SELECT TIMESTAMPDIFF(SECOND, last_attempt_gmt, UTC_TIMESTAMP())"
    f" FROM {_ACTIONS} WHERE status IN ('complete', 'canceled') AND last_attempt_gmt >="
    f" '{VALID_DATE_FLOOR}' ORDER BY last_attempt_gmt LIMIT 1",
}


def heavy_case(server: Server, profile: StoreProfile, workdir: Path) -> dict[str, Any]:
    database = profile.name
    site = replace(hot_sql.store_site(server, database), query_timeout=600.0)
    result: dict[str, Any] = {"store": database, "actions": profile.actions}
    with our_exporter(server, database, workdir) as exporter:
        _wait_for_first_refresh(exporter)
        for _ in range(5):
            exporter.scrape()
        result["quiet_scrape_s"] = _scrapes_while(lambda: _idle(QUIET_SCRAPES), exporter)[1]

        statements: list[float] = []
        _, during_old = _scrapes_while(lambda: _one_statement(site, statements), exporter)
        result["one_statement"] = _costs(statements) | {"scrape_during_s": during_old}

        pauses = TimedPauses()
        ledger = ActionLedger(
            site.heavy_chunk_rows, settled_check_every=site.heavy_settled_check_every, sleep=pauses
        )
        first: dict[str, Any] = {}
        _, during_walk = _scrapes_while(lambda: _walk(site, ledger, pauses, first), exporter)
        result["walk_first"] = first | {"scrape_during_s": during_walk}
        _walk(site, ledger, pauses, {})  # the chunks near the highest id, counted again
        churn = max(10, round(profile.actions * INTERVAL / (RETENTION_DAYS * 86400)))
        # Steady refreshes, each after an interval's traffic: the default (every chunk
        # checked at every refresh) and chunks of finished actions checked in turns.
        for key, every in (
            ("walk_steady", site.heavy_settled_check_every),
            ("walk_steady_in_turns", 2),
        ):
            ledger.settled_check_every = every
            walks = []
            for _ in range(2):
                with server.connect(database) as connection, _traffic(connection, churn):
                    walks.append(_walk(site, ledger, pauses, {}))
            result[key] = _mean(walks) | {"traffic_per_interval": churn, "check_every": every}
    return result


def _wait_for_first_refresh(exporter: Running, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any('collector="status"' in labels for labels in heavy_reads(exporter.scrape())):
            return
        time.sleep(1)
    raise RuntimeError(f"the heavy tier was not refreshed within {timeout:.0f} s")


def _scrapes_while(work: Callable[[], object], exporter: Running) -> tuple[object, float]:
    """Runs `work` in a thread and times hot scrapes until it ends: their median."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(work()), daemon=True)
    thread.start()
    timings: list[float] = []
    while thread.is_alive() or len(timings) < 3:
        started = time.perf_counter()
        exporter.scrape()
        timings.append(time.perf_counter() - started)
    thread.join()
    return (outcome[0] if outcome else None), statistics.median(timings)


def _idle(scrapes: int) -> None:
    # The quiet baseline: the same scrape loop with nothing else running, for about as
    # many scrapes as a short refresh gives.
    time.sleep(scrapes * 0.02)


def _one_statement(site: Any, durations: list[float]) -> None:
    session = Session(site, check_grants=False)
    try:
        for sql in ONE_STATEMENT.values():
            started = time.perf_counter()
            session.query(sql)
            durations.append(time.perf_counter() - started)
    finally:
        session.close()


class TimedPauses:
    """The walk's pause after each statement (as long as the statement took, the ledger's
    ratio being 1): what it is given is each statement's duration."""

    def __init__(self) -> None:
        self.durations: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.durations.append(seconds)
        time.sleep(seconds)


def _mean(walks: list[dict[str, Any]]) -> dict[str, Any]:
    """The walks' average cost; their longest statement."""
    mean = {key: statistics.mean(walk[key] for walk in walks) for key in walks[0]}
    mean["longest_statement_s"] = max(walk["longest_statement_s"] for walk in walks)
    return mean


def _walk(
    site: Any, ledger: ActionLedger, pauses: TimedPauses, into: dict[str, Any]
) -> dict[str, Any]:
    pauses.durations = []
    session = Session(site, check_grants=False)
    started = time.perf_counter()
    try:
        totals = ledger.refresh(session, TableNames(PREFIX))
    finally:
        session.close()
    into.update(
        _costs(pauses.durations)
        | {
            "wall_s": time.perf_counter() - started,
            "chunks": totals.chunks,
            "recounted": totals.recounted,
            "checked": totals.checked,
            "skipped": totals.skipped,
        }
    )
    return into


def _costs(durations: list[float]) -> dict[str, Any]:
    total = sum(durations)
    return {
        "statements": len(durations),
        "longest_statement_s": max(durations, default=0.0),
        "database_s": total,
        "database_s_per_hour": total * 3600 / INTERVAL,
    }


@contextmanager
def _traffic(connection: pymysql.connections.Connection[Any], count: int) -> Iterator[None]:
    """An interval's worth of the store's own traffic, undone afterwards: `count` new
    finished actions, a quarter as many due actions completed, `count` of the oldest
    finished ones purged."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT MAX(action_id) FROM {_ACTIONS}")
        (last,) = cursor.fetchone()
        cursor.execute(
            f"SELECT action_id FROM {_ACTIONS} WHERE status = 'pending' AND claim_id = 0"
            " AND scheduled_date_gmt <= UTC_TIMESTAMP() ORDER BY action_id LIMIT %s",
            (max(1, count // 4),),
        )
        completed = [row[0] for row in cursor.fetchall()]
        cursor.execute(f"CREATE TEMPORARY TABLE bench_purged LIKE {_ACTIONS}")
        try:
            cursor.execute(
                f"INSERT INTO {_ACTIONS} (hook, status, scheduled_date_gmt, scheduled_date_local,"
                " priority, args, schedule, group_id, attempts, last_attempt_gmt,"
                " last_attempt_local) SELECT hook, 'complete', UTC_TIMESTAMP(), UTC_TIMESTAMP(),"
                " priority, args, schedule, group_id, 1, UTC_TIMESTAMP(), UTC_TIMESTAMP()"
                f" FROM {_ACTIONS} WHERE action_id <= %s ORDER BY action_id DESC LIMIT %s",
                (last, count),
            )
            _set_status(cursor, completed, "complete")
            cursor.execute(
                f"INSERT INTO bench_purged SELECT * FROM {_ACTIONS} WHERE status = 'complete'"
                " ORDER BY action_id LIMIT %s",
                (count,),
            )
            cursor.execute(
                f"DELETE FROM {_ACTIONS} WHERE action_id IN (SELECT action_id FROM bench_purged)"
            )
            yield
        finally:
            cursor.execute(f"DELETE FROM {_ACTIONS} WHERE action_id > %s", (last,))
            _set_status(cursor, completed, "pending")
            cursor.execute(f"INSERT IGNORE INTO {_ACTIONS} SELECT * FROM bench_purged")
            cursor.execute("DROP TEMPORARY TABLE bench_purged")
            cursor.execute(f"ALTER TABLE {_ACTIONS} AUTO_INCREMENT = 1")


def _set_status(cursor: Any, ids: list[int], status: str) -> None:
    if ids:
        marks = placeholders(ids)
        cursor.execute(
            f"UPDATE {_ACTIONS} SET status = %s WHERE action_id IN ({marks})", (status, *ids)
        )
