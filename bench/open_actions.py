"""The heavy tier's reading of the open actions per chunk, on a store with many scheduled
actions (a subscription store's renewals): the one statement it was, which read every open
action at once, and the pages of the (status, scheduled_date_gmt) index it reads now, side
by side on the same store. Reported: statements, the longest, their total, and that both
count the same.

    python -m bench.open_actions --store store_10m_future2m
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from dataclasses import replace
from typing import Any

from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.totals.chunk import FINISHED
from actionscheduler_exporter.totals.ledger import read_open_counts
from bench.heavy import TimedPauses
from bench.server import bench_server
from testbed import hot_sql
from testbed.generate import PREFIX
from testbed.mariadb import Server

RUNS = 3


def open_actions_case(server: Server, database: str, chunk_rows: int = 20_000) -> dict[str, Any]:
    site = replace(hot_sql.store_site(server, database), query_timeout=600.0)
    actions = TableNames(PREFIX).actions
    finished = ", ".join(f"'{status}'" for status in FINISHED)
    session = Session(site, check_grants=False)
    try:
        (open_actions,) = session.query(
            f"SELECT COUNT(*) FROM {actions} WHERE status NOT IN ({finished})"
        )[0]
        before: list[float] = []
        old: dict[int, Counter[str]] = {}
        for _ in range(RUNS):
            started = time.perf_counter()
            rows = session.query(
                f"SELECT action_id DIV %s, status, COUNT(*) FROM {actions}"
                f" WHERE status NOT IN ({finished}) GROUP BY 1, 2",
                (chunk_rows,),
            )
            before.append(time.perf_counter() - started)
            old = {}
            for cell, status, count in rows:
                old.setdefault(int(cell), Counter())[str(status).lower()] += int(count)
        pages: list[dict[str, Any]] = []
        new: dict[int, Counter[str]] = {}
        for _ in range(RUNS):
            pauses = TimedPauses()
            started = time.perf_counter()
            new = read_open_counts(session, TableNames(PREFIX), chunk_rows, sleep=pauses)
            pages.append(
                {
                    "statements": len(pauses.durations),
                    "longest_s": max(pauses.durations),
                    "database_s": sum(pauses.durations),
                    "wall_s": time.perf_counter() - started,
                }
            )
    finally:
        session.close()
    return {
        "store": database,
        "open_actions": int(open_actions),
        "one_statement_s": statistics.median(before),
        "pages_statements": pages[-1]["statements"],
        "pages_longest_s": statistics.median(page["longest_s"] for page in pages),
        "pages_database_s": statistics.median(page["database_s"] for page in pages),
        "pages_wall_s": statistics.median(page["wall_s"] for page in pages),
        "same_counts": {c: +n for c, n in old.items()} == {c: +n for c, n in new.items()},
    }


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "The heavy tier's open actions per chunk, before (one statement) and now (pages):",
        "",
        "| store | open actions | one statement | pages: statements | longest | database "
        "time | wall (with pauses) | same counts |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for result in results:
        lines.append(
            f"| {result['store']} | {result['open_actions']:,} | "
            f"{result['one_statement_s'] * 1000:.0f} ms | {result['pages_statements']} | "
            f"{result['pages_longest_s'] * 1000:.0f} ms | "
            f"{result['pages_database_s'] * 1000:.0f} ms | {result['pages_wall_s']:.1f} s | "
            f"{'yes' if result['same_counts'] else 'NO'} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="store_10m_future2m", help="comma-separated")
    arguments = parser.parse_args()
    with bench_server() as server:
        results = [open_actions_case(server, s.strip()) for s in arguments.store.split(",")]
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()
