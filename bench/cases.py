"""The benchmark's cases: a store of a given size, a huge due backlog, and a log burst."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

import pymysql

from bench.exporters import BASELINE, Running, generic_exporter, our_exporter
from bench.measure import (
    heavy_reads,
    metric_values,
    resident_mib,
    rows_examined_per_call,
    timed,
    timed_side_by_side,
)
from testbed import hot_sql
from testbed.generate import PREFIX
from testbed.mariadb import Server
from testbed.store_profile import StoreProfile

SCRAPES = 60
WARM_UP = 5
ROWS_REPEAT = 20
BURST_ROWS = 100_000
_HEAVY = ("status", "failures", "retention")


def store_case(
    server: Server, profile: StoreProfile, workdir: Path, generic_scrapes: int
) -> dict[str, Any]:
    """The exporter, its hot tier's raw SQL and the generic exporter on one store."""
    database = profile.name
    result: dict[str, Any] = {"store": database, "actions": profile.actions, "due": profile.due}
    with server.connect(database) as connection:
        statements = hot_sql.hot_statements(hot_sql.store_site(server, database))
        result["hot_statements"] = len(statements)
        result["hot_plans"] = hot_sql.explain(connection, statements)
        result["hot_statement_medians"] = [
            {
                "sql": sql,
                "median_s": timed(partial(hot_sql.replay, connection, [(sql, args)]), 9).median,
            }
            for sql, args in statements
        ]

        def raw() -> None:
            hot_sql.replay(connection, statements)

        with our_exporter(server, database, workdir) as exporter:
            _wait_for_heavy_tier(exporter)
            for _ in range(WARM_UP):
                exposition = exporter.scrape()
                raw()
            hot_before = _hot_database_seconds(exporter.scrape())
            scrapes, raws = timed_side_by_side(exporter.scrape, raw, SCRAPES)
            hot_after = _hot_database_seconds(exporter.scrape())
            result["scrape"], result["raw_hot_sql"] = scrapes.as_dict(), raws.as_dict()
            # The exporter's own count of its statements' time (both tiers' counter is
            # actionscheduler_exporter_database_seconds_total), per scrape of the hot tier.
            result["hot_db_seconds_per_scrape"] = (hot_after - hot_before) / (SCRAPES + 1)
            result["scrape_rows_examined"] = rows_examined_per_call(
                connection, exporter.scrape, ROWS_REPEAT
            )
            result["raw_hot_rows_examined"] = rows_examined_per_call(connection, raw, ROWS_REPEAT)
            rss, peak = resident_mib(exporter.process.pid)
            result["rss_mib"], result["rss_peak_mib"] = rss, peak
            durations = metric_values(
                exposition, "actionscheduler_exporter_collector_duration_seconds"
            )
            result["heavy_refresh_s"] = {
                name: value
                for name in _HEAVY
                for labels, value in durations.items()
                if f'collector="{name}"' in labels
            }
            if BASELINE:
                # Another checkout's exporter (before a change), side by side with this one.
                with our_exporter(server, database, workdir, Path(BASELINE)) as baseline:
                    _wait_for_heavy_tier(baseline)
                    for _ in range(WARM_UP):
                        baseline.scrape()
                    ours, theirs = timed_side_by_side(exporter.scrape, baseline.scrape, SCRAPES)
                    result["side_by_side"] = {
                        "scrape": ours.as_dict(),
                        "baseline_scrape": theirs.as_dict(),
                        "baseline_rss_mib": resident_mib(baseline.process.pid)[0],
                    }
        if generic_scrapes:
            with generic_exporter(server, database, workdir) as generic:
                generic.scrape()
                result["generic_scrape"] = timed(generic.scrape, generic_scrapes).as_dict()
                result["generic_rss_mib"] = resident_mib(generic.process.pid)[0]
    return result


def _hot_database_seconds(exposition: str) -> float:
    values = metric_values(exposition, "actionscheduler_exporter_database_seconds_total")
    return sum(value for labels, value in values.items() if 'tier="hot"' in labels)


def burst_case(server: Server, profile: StoreProfile, workdir: Path) -> dict[str, Any]:
    """100,000 log rows arrive between two scrapes: how the following scrapes absorb them."""
    database = profile.name
    site = hot_sql.store_site(server, database)
    with (
        server.connect(database) as connection,
        our_exporter(server, database, workdir) as exporter,
    ):
        _wait_for_heavy_tier(exporter)
        for _ in range(WARM_UP):
            exporter.scrape()
        read_before = _rows_read(exporter.scrape())
        last_action, inserted = _insert_burst(connection)
        try:
            scrapes = []
            read = read_before
            for _ in range(100):
                started = time.perf_counter()
                exposition = exporter.scrape()
                duration = time.perf_counter() - started
                now_read = _rows_read(exposition)
                lag = metric_values(exposition, "actionscheduler_log_cursor_lag_rows")
                scrapes.append(
                    {
                        "seconds": duration,
                        "rows_read": now_read - read,
                        "lag": next(iter(lag.values()), 0.0),
                    }
                )
                read = now_read
                if now_read - read_before >= inserted:
                    break
        finally:
            _remove_burst(connection, last_action)
    return {
        "store": database,
        "burst_rows": inserted,
        "row_limit": site.log_rows_per_scrape,
        "scrapes": scrapes,
        "max_rows_per_scrape": max(item["rows_read"] for item in scrapes),
        "rows_counted": read - read_before,
        "max_scrape_s": max(item["seconds"] for item in scrapes),
    }


def _wait_for_heavy_tier(exporter: Running, timeout: float = 900) -> None:
    """Until the first background refresh is done, so that no timed scrape overlaps it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reads = heavy_reads(exporter.scrape())
        if len(reads) == len(_HEAVY):
            return
        time.sleep(1)
    raise RuntimeError(f"the heavy tier was not refreshed within {timeout:.0f} s")


def _rows_read(exposition: str) -> float:
    return sum(metric_values(exposition, "actionscheduler_log_rows_read_total").values())


def _insert_burst(connection: pymysql.connections.Connection[Any]) -> tuple[int, int]:
    """New actions that each log created, started and complete: BURST_ROWS log rows."""
    actions, logs = f"{PREFIX}actionscheduler_actions", f"{PREFIX}actionscheduler_logs"
    _reset_auto_increment(connection)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT MAX(action_id), MAX(group_id) FROM {actions}")
        last_action, group_id = cursor.fetchone() or (0, 0)
        count = BURST_ROWS // 3
        messages = ("action created", "action started via WP CLI", "action complete via WP CLI")
        batch = 5_000
        for first in range(0, count, batch):
            ids = range(last_action + 1 + first, last_action + 1 + min(count, first + batch))
            cursor.executemany(
                f"INSERT INTO {actions} (action_id, hook, status, scheduled_date_gmt,"
                " scheduled_date_local, args, group_id, attempts, last_attempt_gmt,"
                " last_attempt_local) VALUES (%s, 'woocommerce_deliver_webhook_async',"
                " 'complete', UTC_TIMESTAMP(), UTC_TIMESTAMP(), '[1]', %s, 1,"
                " UTC_TIMESTAMP(), UTC_TIMESTAMP())",
                [(action_id, group_id) for action_id in ids],
            )
            cursor.executemany(
                f"INSERT INTO {logs} (action_id, message, log_date_gmt, log_date_local)"
                " VALUES (%s, %s, UTC_TIMESTAMP(), UTC_TIMESTAMP())",
                [(action_id, message) for action_id in ids for message in messages],
            )
    return int(last_action), count * len(messages)


def _remove_burst(connection: pymysql.connections.Connection[Any], last_action: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {PREFIX}actionscheduler_logs WHERE action_id > %s", (last_action,)
        )
        cursor.execute(
            f"DELETE FROM {PREFIX}actionscheduler_actions WHERE action_id > %s", (last_action,)
        )
    _reset_auto_increment(connection)


def _reset_auto_increment(connection: pymysql.connections.Connection[Any]) -> None:
    """Ids continue right after the store's own, as after generation: a jump left by an
    earlier run would be a gap that the log cursor waits on (log_gap_grace) first."""
    with connection.cursor() as cursor:
        for table in ("actions", "logs"):
            # InnoDB raises a value below the table's largest id to that id + 1.
            cursor.execute(f"ALTER TABLE {PREFIX}actionscheduler_{table} AUTO_INCREMENT = 1")
