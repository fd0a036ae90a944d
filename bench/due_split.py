"""The due backlog split by group and hook (issue 15): what it costs per scrape, by cap.

For each cap, the split collector's own statements are captured (a recording session
handed to the real collector) and replayed raw: their median time, the rows the server
read for them, and the whole hot tier's raw SQL with the split and without it, timed side
by side.

    python -m bench.due_split --stores store_10m,store_10m_due1m
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
from typing import Any

from actionscheduler_exporter.collectors.due_split import DueSplitCollector
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.tables import read_table_stats
from actionscheduler_exporter.sources.database import DatabaseContext
from bench.measure import ms, timed, timed_side_by_side
from bench.server import bench_server
from testbed import hot_sql
from testbed.mariadb import Server
from testbed.rows_read import session_rows_examined

CAPS = (10_000, 20_000, 100_000)
REPEAT = 15


def split_statements(server: Server, database: str, cap: int) -> list[hot_sql.Statement]:
    site = dataclasses.replace(hot_sql.store_site(server, database), due_split_rows=cap)
    session = hot_sql.RecordingSession(site)
    try:
        tables = TableNames(site.table_prefix)
        context = DatabaseContext(session, tables, site, read_table_stats(session, tables))
        session.statements.clear()
        list(DueSplitCollector().read(context))
        return list(session.statements)
    finally:
        session.close()


def due_split_case(server: Server, database: str) -> dict[str, Any]:
    result: dict[str, Any] = {"store": database, "caps": []}
    site = hot_sql.store_site(server, database)
    with server.connect(database) as connection:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT COUNT(*) FROM {site.table_prefix}actionscheduler_actions"
                " WHERE status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP()"
            )
            result["due"] = int(cursor.fetchone()[0])
        without = hot_sql.hot_statements(dataclasses.replace(site, due_split_rows=0))
        for cap in CAPS:
            statements = split_statements(server, database, cap)
            with_split = hot_sql.hot_statements(dataclasses.replace(site, due_split_rows=cap))
            hot_sql.replay(connection, statements)  # warm
            per_statement: list[dict[str, Any]] = []
            for statement in statements:
                replay_one = functools.partial(hot_sql.replay, connection, [statement])
                timings = timed(replay_one, REPEAT)
                rows = session_rows_examined(connection, replay_one)
                per_statement.append(
                    {"sql": statement[0][:80], "median_s": timings.median, "rows_examined": rows}
                )
            on, off = timed_side_by_side(
                functools.partial(hot_sql.replay, connection, with_split),
                functools.partial(hot_sql.replay, connection, without),
                REPEAT,
            )
            result["caps"].append(
                {
                    "cap": cap,
                    "statements": per_statement,
                    "split_median_s": sum(float(item["median_s"]) for item in per_statement),
                    "hot_with_split_median_s": on.median,
                    "hot_without_split_median_s": off.median,
                }
            )
    return result


def table(cases: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| store | due | cap | split statements (median) | rows read"
        " | hot tier raw SQL with split | without | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case in cases:
        for item in case["caps"]:
            rows = sum(statement["rows_examined"] for statement in item["statements"])
            on, off = item["hot_with_split_median_s"], item["hot_without_split_median_s"]
            lines.append(
                f"| {case['store']} | {case['due']:,} | {item['cap']:,} "
                f"| {ms(item['split_median_s'])} | {rows:,} "
                f"| {ms(on)} | {ms(off)} | {on / off:.2f} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="store_10m", help="comma-separated databases")
    arguments = parser.parse_args()
    cases = []
    with bench_server() as server:
        for database in arguments.stores.split(","):
            print(f"measuring the due split on {database} ...", flush=True)
            cases.append(due_split_case(server, database.strip()))
    print(json.dumps(cases, indent=2))
    print("\n".join(table(cases)))


if __name__ == "__main__":
    main()
