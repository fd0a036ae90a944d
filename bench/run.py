"""Runs the benchmark side by side on one machine and prints the results and the targets.

    python -m bench.run                      # `make bench`: 100k and 1M stores, backlog, burst
    python -m bench.run --sizes 10m          # the 10M store (generated once, about 25 min)
    python -m bench.run --floor-only         # only the exporter against the floor (minutes)

Stores are generated on first use into the benchmark's own MariaDB (.bench/); results go
to .bench/results/ as JSON, and the summary to standard output, for docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.cases import burst_case, store_case
from bench.due_split import due_split_case
from bench.due_split import table as due_split_table
from bench.floor_cases import (
    EXPORTER_CONNECTIONS,
    FLOOR_TOGETHER,
    many_stores_floor_case,
    one_store_floor_case,
)
from bench.floor_report import cpu_table, floor_table, floor_targets, replay_table
from bench.heavy import heavy_case
from bench.many_sites import many_sites_case, prepare, second_server
from bench.measure import ms
from bench.native import native_case
from bench.open_actions import open_actions_case
from bench.open_actions import table as open_actions_table
from bench.server import APART, BUFFER_POOL, ROOT, bench_server
from testbed.generate import generate, is_generated
from testbed.mariadb import Server
from testbed.store_profile import StoreProfile

SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
BACKLOG = StoreProfile(1_100_000, due=1_000_000)
# The generic exporter takes seconds per scrape on big stores: fewer of its scrapes there.
GENERIC_SCRAPES = {100_000: 50, 1_000_000: 50, 10_000_000: 20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k,1m", help="comma-separated: 100k, 1m, 10m")
    parser.add_argument("--no-backlog", action="store_true", help="skip the 1M due backlog")
    parser.add_argument("--no-burst", action="store_true", help="skip the log burst")
    parser.add_argument("--no-many-sites", action="store_true", help="skip the 1,000-site set-ups")
    parser.add_argument(
        "--many-sites-only", action="store_true", help="only the 1,000-site set-ups"
    )
    parser.add_argument(
        "--floor-only",
        action="store_true",
        help="only the exporter against the floor: each store, 1,000 databases, 1,000 subsites",
    )
    parser.add_argument(
        "--no-floor-many", action="store_true", help="with --floor-only: one store only"
    )
    arguments = parser.parse_args()
    if arguments.many_sites_only:
        arguments.no_backlog = arguments.no_burst = True
    profiles = [StoreProfile(SIZES[size.strip()]) for size in arguments.sizes.split(",")]
    workdir = ROOT / ".bench" / "work"
    workdir.mkdir(parents=True, exist_ok=True)

    report: dict[str, Any] = {"machine": _machine(), "stores": [], "generated": {}}
    results = ROOT / ".bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = results / f"{stamp}.json"
    with bench_server() as server, _saved(report, path):
        report["machine"]["mariadb"] = _server_version(server)
        if arguments.floor_only:
            _floor_only(server, profiles, workdir, report, many=not arguments.no_floor_many)
            print(summary(report))
            print(f"\nfull results: {path.relative_to(ROOT)}")
            return
        for profile in [*profiles, *([] if arguments.no_backlog else [BACKLOG])]:
            report["generated"][profile.name] = _ensure(server, profile)
        for profile in [] if arguments.many_sites_only else profiles:
            print(f"measuring {profile.name} against the floor ...", flush=True)
            report.setdefault("floor_stores", []).append(
                one_store_floor_case(server, profile, workdir)
            )
            print(f"measuring {profile.name} ...", flush=True)
            report["stores"].append(
                store_case(server, profile, workdir, GENERIC_SCRAPES[profile.actions])
            )
            print(f"measuring the heavy tier on {profile.name} ...", flush=True)
            report.setdefault("heavy", []).append(heavy_case(server, profile, workdir))
        # The due backlog split by group (issue 15): the largest store, with its 20,000 due
        # actions and with a million (generated once, like the others).
        split_stores = [profiles[-1], dataclasses.replace(profiles[-1], due=1_000_000)]
        # A store smaller than a million actions cannot hold the million due.
        split_stores = [profile for profile in split_stores if profile.due < profile.actions]
        for profile in [] if arguments.many_sites_only else split_stores:
            report["generated"][profile.name] = _ensure(server, profile)
            print(f"measuring the due split on {profile.name} ...", flush=True)
            report.setdefault("due_split", []).append(due_split_case(server, profile.name))
        if profiles[-1].actions >= 10_000_000 and not arguments.many_sites_only:
            # Two million scheduled renewals (issue 29): the heavy tier's open actions.
            renewals = dataclasses.replace(profiles[-1], future_share=0.2)
            report["generated"][renewals.name] = _ensure(server, renewals)
            print(f"measuring the open actions on {renewals.name} ...", flush=True)
            report["open_actions"] = [open_actions_case(server, renewals.name)]
        if not arguments.no_backlog:
            print(f"measuring {BACKLOG.name} ...", flush=True)
            report["backlog"] = store_case(server, BACKLOG, workdir, generic_scrapes=0)
        if not arguments.no_burst:
            print(f"measuring a log burst on {profiles[-1].name} ...", flush=True)
            report["burst"] = burst_case(server, profiles[-1], workdir)
        if not arguments.no_many_sites:
            with second_server() as other:
                print("preparing 1,000 subsites and 1,000 databases ...", flush=True)
                prepare([server, other])
                print("measuring many sites ...", flush=True)
                report["many_sites"] = many_sites_case([server, other], workdir)
                print("measuring many sites against the floor ...", flush=True)
                report["floor_many"] = many_stores_floor_case(server, workdir)
        if not arguments.many_sites_only:  # no database: twenty seconds
            print("measuring classic against native histograms ...", flush=True)
            report["native_histograms"] = native_case()
    print(summary(report))
    print(f"\nfull results: {path.relative_to(ROOT)}")


def _floor_only(
    server: Server,
    profiles: list[StoreProfile],
    workdir: Path,
    report: dict[str, Any],
    many: bool,
) -> None:
    """The exporter (and the baseline) against the floor, and nothing else."""
    load = os.getloadavg()
    for profile in profiles:
        report["generated"][profile.name] = _ensure(server, profile)
        print(f"measuring {profile.name} against the floor ...", flush=True)
        report.setdefault("floor_stores", []).append(one_store_floor_case(server, profile, workdir))
    if many:
        print("preparing 1,000 subsites and 1,000 databases ...", flush=True)
        prepare([server], spread=False)
        print("measuring many sites against the floor ...", flush=True)
        report["floor_many"] = many_stores_floor_case(server, workdir)
    report["machine"]["load"] = [load, os.getloadavg()]


@contextlib.contextmanager
def _saved(report: dict[str, Any], path: Path) -> Iterator[None]:
    """Writes what was measured even when a later case fails."""
    try:
        yield
    finally:
        path.write_text(json.dumps(report, indent=2), encoding="utf-8")


def _ensure(server: Server, profile: StoreProfile) -> float | None:
    """Seconds the generation took, or None when the store already existed."""
    with server.connect(local_infile=True) as connection:
        if is_generated(connection, profile):
            return None
        print(f"generating {profile.name} ...", flush=True)
        return generate(connection, profile)


def summary(report: dict[str, Any]) -> str:
    machine = report["machine"]
    heading = (
        f"{machine['date']} · {machine['cpu']} ({machine['cores']} cores) · "
        f"MariaDB {machine['mariadb']} (buffer pool {machine['buffer_pool']}) · "
        f"Python {machine['python']}"
    )
    if machine.get("apart"):
        heading += " · the server on a core of its own, the clients on the others"
    if machine.get("exporter_connections"):
        heading += (
            f" · this checkout's exporter with connections_per_server"
            f" {machine['exporter_connections']} for 1,000 stores"
        )
    if machine.get("floor_together"):
        heading += " · the floor of 1,000 stores reads each pass's values together (5 subqueries)"
    if "load" in report["machine"]:
        before, after = report["machine"]["load"]
        heading += (
            f" · load average before {before[0]:.1f} {before[1]:.1f} {before[2]:.1f},"
            f" after {after[0]:.1f} {after[1]:.1f} {after[2]:.1f}"
        )
    if not report["stores"] and ("floor_stores" in report or "floor_many" in report):
        verdicts = _verdicts(floor_targets(report), apart=bool(machine.get("apart")))
        tables = [*floor_table(report), "", *cpu_table(report), "", *replay_table(report)]
        return "\n".join([heading, "", *tables, "", *verdicts])
    if not report["stores"]:  # --many-sites-only
        verdicts = _verdicts(many_sites_targets(report))
        return "\n".join([heading, "", *many_sites_table(report["many_sites"]), "", *verdicts])
    lines = [
        heading,
        "",
        "| store | scrape median | p95 | raw hot SQL median | ratio | rows examined "
        "(scrape / raw) | RSS MiB | heavy refresh s | generic median | generic / ours |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for store in [*report["stores"], *([report["backlog"]] if "backlog" in report else [])]:
        scrape, raw = store["scrape"], store["raw_hot_sql"]
        generic = store.get("generic_scrape")
        lines.append(
            f"| {store['store']} | {ms(scrape['median_s'])} | {ms(scrape['p95_s'])} | "
            f"{ms(raw['median_s'])} | {scrape['median_s'] / raw['median_s']:.2f} | "
            f"{store['scrape_rows_examined']:,.0f} / {store['raw_hot_rows_examined']:,.0f} | "
            f"{store['rss_mib']:.1f} | {sum(store['heavy_refresh_s'].values()):.2f} | "
            + (
                f"{ms(generic['median_s'])} | {generic['median_s'] / scrape['median_s']:.0f}x |"
                if generic
                else "- | - |"
            )
        )
    if "burst" in report:
        burst = report["burst"]
        lines += [
            "",
            f"log burst of {burst['burst_rows']:,} rows on {burst['store']}: "
            f"{len(burst['scrapes'])} scrapes, at most {burst['max_rows_per_scrape']:,.0f} "
            f"rows per scrape (limit {burst['row_limit']:,}), slowest scrape "
            f"{ms(burst['max_scrape_s'])}, {burst['rows_counted']:,.0f} rows counted",
        ]
    lines += ["", *floor_table(report), "", *cpu_table(report), "", *replay_table(report)]
    lines += ["", *hot_cost_table(report["stores"])]
    if "due_split" in report:
        lines += [
            "",
            "The due backlog split by group and hook, per cap:",
            "",
            *due_split_table(report["due_split"]),
        ]
    lines += ["", *heavy_table(report.get("heavy", []))]
    if any("side_by_side" in store for store in report["stores"]):
        lines += ["", *side_by_side_table(report["stores"])]
    if report.get("open_actions"):
        lines += ["", *open_actions_table(report["open_actions"])]
    if "many_sites" in report:
        lines += ["", *many_sites_table(report["many_sites"])]
    lines += ["", *targets(report), "", *plans(report["stores"][-1])]
    return "\n".join(lines)


# Prometheus Operator's and the chart's default scrape interval.
SCRAPES_PER_HOUR = 120


def hot_cost_table(stores: list[dict[str, Any]]) -> list[str]:
    """Per store: the hot tier's longest statement and its database time per hour."""
    lines = [
        "Hot tier (every scrape; database time at one scrape per 30 s):",
        "",
        "| store | longest statement | its median | database time per scrape | per hour |",
        "| --- | --- | --- | --- | --- |",
    ]
    for store in stores:
        if "hot_statement_medians" not in store:
            continue
        longest = max(store["hot_statement_medians"], key=lambda item: item["median_s"])
        per_scrape = store["hot_db_seconds_per_scrape"]
        lines.append(
            f"| {store['store']} | `{longest['sql'][:60]}…` | {ms(longest['median_s'])} "
            f"| {ms(per_scrape)} | {per_scrape * SCRAPES_PER_HOUR:.1f} s |"
        )
    return lines


def side_by_side_table(stores: list[dict[str, Any]]) -> list[str]:
    """This checkout's scrapes against the baseline's (AS_BENCH_BASELINE), alternated."""
    lines = [
        "This checkout and the baseline, scrapes alternated on the same store:",
        "",
        "| store | scrape median | p95 | baseline median | p95 | ratio | RSS MiB (baseline) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for store in stores:
        pair = store.get("side_by_side")
        if pair is None:
            continue
        ours, theirs = pair["scrape"], pair["baseline_scrape"]
        lines.append(
            f"| {store['store']} | {ms(ours['median_s'])} | {ms(ours['p95_s'])} | "
            f"{ms(theirs['median_s'])} | {ms(theirs['p95_s'])} | "
            f"{ours['median_s'] / theirs['median_s']:.2f} | "
            f"{store['rss_mib']:.1f} ({pair['baseline_rss_mib']:.1f}) |"
        )
    return lines


def many_sites_table(setups: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "Many sites (stores of 300 actions; steady scrapes back to back):",
        "",
        "| set-up | first scrape | sites up in it | steady median | p95 | RSS MiB "
        "| most connections per server | statements per site and scrape "
        "| heavy tier, every site refreshed after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, setup in setups.items():
        heavy = setup["heavy_all_refreshed_s"]
        connections = ", ".join(str(n) for n in setup["connections_per_server"].values())
        statements = setup.get("statements_per_site")
        lines.append(
            f"| {name} | {setup['first_scrape_s']:.2f} s | {setup['first_scrape_sites_up']:,} "
            f"of {setup['sites']:,} | {ms(setup['steady_median_s'])} | "
            f"{ms(setup['steady_p95_s'])} | {setup['rss_mib']:.1f} | {connections} | "
            + (f"{statements:.2f} | " if statements is not None else "- | ")
            + (f"{heavy:.1f} s |" if heavy is not None else "- |")
        )
    return lines


def heavy_table(stores: list[dict[str, Any]]) -> list[str]:
    """The heavy tier before (one statement per collector) and now (the chunked walk)."""
    lines = [
        "Heavy tier, side by side (database time per hour at heavy_interval 5m):",
        "",
        "| store | way | statements | longest statement | database time per refresh "
        "| per hour | wall | hot scrape during / quiet |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    ways = (
        ("one_statement", "one statement per collector (before)"),
        ("walk_first", "chunked walk, first refresh"),
        ("walk_steady", "chunked walk, steady (default: every chunk checked each refresh)"),
        ("walk_steady_in_turns", "chunked walk, steady (settled chunks every 2nd refresh)"),
    )
    for store in stores:
        quiet = store["quiet_scrape_s"]
        for key, name in ways:
            way = store[key]
            during = way.get("scrape_during_s")
            detail = (
                f" ({way['recounted']:.0f} of {way['chunks']:.0f} chunks recounted,"
                f" {way['skipped']:.0f} not due)"
                if "chunks" in way
                else ""
            )
            lines.append(
                f"| {store['store']} | {name}{detail} | {way['statements']:,.0f} | "
                f"{ms(way['longest_statement_s'])} | {way['database_s']:.2f} s | "
                f"{way['database_s_per_hour']:.1f} s | "
                + (f"{way['wall_s']:.1f} s" if "wall_s" in way else "-")
                + " | "
                + (f"{ms(during)} / {ms(quiet)} ({during / quiet:.2f}x) |" if during else "- |")
            )
    return lines


def plans(store: dict[str, Any]) -> list[str]:
    """Each hot statement of a store: the indexes it reads and the rows it really read."""
    lines = [
        f"Hot-tier statements on {store['store']}:",
        "",
        "| statement | index (access) | rows read |",
        "| --- | --- | --- |",
    ]
    for explained in store["hot_plans"]:
        access = ", ".join(
            f"{plan['key'] or '-'} ({plan['type'] or plan['extra']})" for plan in explained["plan"]
        )
        sql = explained["sql"].replace("|", "\\|")
        lines.append(
            f"| `{sql[:110]}{'...' if len(sql) > 110 else ''}` | {access} | "
            f"{explained['rows_examined']:,} |"
        )
    return lines


def targets(report: dict[str, Any]) -> list[str]:
    """The issue's targets. Those set at 10M actions are only judged when the run has the
    10M store; on a smaller largest store they are shown for information."""
    stores = report["stores"]
    smallest, largest = stores[0], stores[-1]
    at_10m: bool | None = True if largest["actions"] >= SIZES["10m"] else None
    scrape, raw = largest["scrape"]["median_s"], largest["raw_hot_sql"]["median_s"]
    checks: list[tuple[str, bool | None, str]] = [
        (
            f"scrape at {largest['store']} <= 1.5 x its raw hot SQL",
            at_10m and scrape <= 1.5 * raw,
            f"{scrape / raw:.2f}x",
        ),
        (
            f"scrape at {largest['store']} <= 1.5 x scrape at {smallest['store']}",
            at_10m and scrape <= 1.5 * smallest["scrape"]["median_s"],
            f"{scrape / smallest['scrape']['median_s']:.2f}x",
        ),
        (
            "exporter RSS < 60 MB (57.2 MiB)",
            max(s["rss_mib"] for s in stores) < 60 / 1.048576,
            f"{max(s['rss_mib'] for s in stores):.1f} MiB",
        ),
    ]
    if "generic_scrape" in largest:
        generic = largest["generic_scrape"]["median_s"]
        checks.append(
            (
                f"generic exporter at {largest['store']} >= 40 x slower",
                at_10m and generic >= 40 * scrape,
                f"{generic / scrape:.0f}x",
            )
        )
    if "backlog" in report:
        backlog = report["backlog"]["scrape"]
        checks.append(
            (
                "scrape with a 1M due backlog < 1 s",
                backlog["p95_s"] < 1.0,
                f"median {ms(backlog['median_s'])}, p95 {ms(backlog['p95_s'])}",
            )
        )
    if "burst" in report:
        burst = report["burst"]
        checks.append(
            (
                "log burst absorbed within the row limit",
                burst["max_rows_per_scrape"] <= burst["row_limit"]
                and burst["rows_counted"] >= burst["burst_rows"],
                f"{len(burst['scrapes'])} scrapes",
            )
        )
    if report.get("heavy"):
        heavy = report["heavy"][-1]
        first, steady = heavy["walk_first"], heavy["walk_steady"]
        longest = max(first["longest_statement_s"], steady["longest_statement_s"])
        during = first["scrape_during_s"] / heavy["quiet_scrape_s"]
        checks += [
            (
                f"no heavy statement over 1 s at {heavy['store']}",
                at_10m and longest <= 1.0,
                ms(longest),
            ),
            (
                f"heavy database time <= 36 s per hour at {heavy['store']} (1 % of a core)",
                at_10m and steady["database_s_per_hour"] <= 36,
                f"{steady['database_s_per_hour']:.1f} s",
            ),
            (
                f"hot scrape during the first walk <= 1.5 x quiet at {heavy['store']}",
                at_10m and during <= 1.5,
                f"{during:.2f}x",
            ),
        ]
    return _verdicts([*checks, *floor_targets(report), *many_sites_targets(report)])


def many_sites_targets(report: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    checks: list[tuple[str, bool | None, str]] = []
    for name, setup in report.get("many_sites", {}).items():
        if setup["sites"] < 1000 or "shards" in setup or name.endswith("(baseline)"):
            continue
        checks += [
            (
                f"{name}: steady scrape p95 <= 2 s",
                setup["steady_p95_s"] <= 2.0,
                ms(setup["steady_p95_s"]),
            ),
            (
                f"{name}: first scrape within 10 s",
                setup["first_scrape_s"] <= 10.0,
                f"{setup['first_scrape_s']:.2f} s",
            ),
            (
                f"{name}: memory <= 150 MB at its peak",
                setup["rss_peak_mib"] <= 150 / 1.048576,
                f"{setup['rss_peak_mib']:.0f} MiB",
            ),
            (
                f"{name}: connections per server <= connections_per_server (4)",
                max(setup["connections_per_server"].values()) <= 4,
                str(max(setup["connections_per_server"].values())),
            ),
        ]
    return checks


def _verdicts(checks: list[tuple[str, bool | None, str]], *, apart: bool = False) -> list[str]:
    """A line per target; none is judged when the server had a core of its own (the
    targets are for the cores shared)."""
    verdicts = {True: "PASS", False: "FAIL", None: "info, the target is at 10M"}
    if apart:
        return [f"- [info, the cores apart] {name}: {value}" for name, _, value in checks]
    return [f"- [{verdicts[ok]}] {name}: {value}" for name, ok, value in checks]


def _machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            cpu = next(
                (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
                cpu,
            )
    except OSError:
        pass
    return {
        "date": dt.date.today().isoformat(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "buffer_pool": BUFFER_POOL,
        "apart": APART,
        "exporter_connections": EXPORTER_CONNECTIONS,
        "floor_together": FLOOR_TOGETHER,
    }


def _server_version(server: Server) -> str:
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        row = cursor.fetchone()
    return str(row[0]) if row else ""


if __name__ == "__main__":
    main()
