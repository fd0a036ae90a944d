"""The floor benchmark's results as tables and targets (`bench.floor_cases` measures
them): ratios first, then where the CPU went, and the targets of issue 40 judged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench.floor_cases import CONNECTIONS, NOT_JUDGED
from bench.measure import ms


def floor_table(report: dict[str, Any]) -> list[str]:
    """The exporter's time as a ratio to the floor, ratios first."""
    lines = [
        "The exporter against the floor (timed in turn; ratio = exporter / floor):",
        "",
        "| case | exporter | ratio median | ratio p95 | scrape median | p95 "
        "| floor median | p95 | first scrape | up | RSS MiB (peak) | Pss MiB | connections |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows: list[tuple[str, str, dict[str, Any]]] = []
    for store in report.get("floor_stores", []):
        rows += [(store["store"], name, store[name]) for name, _ in _names(store)]
    for setup, by_exporter in report.get("floor_many", {}).items():
        rows += [(setup, name, measured) for name, measured in by_exporter.items()]
    for case, name, measured in rows:
        first = measured.get("first_scrape_s")
        up = f"{measured['sites_up']:,} of {measured['sites']:,}" if "sites" in measured else "-"
        lines.append(
            f"| {case} | {name} | {measured['ratio_median']:.2f}x | {measured['ratio_p95']:.2f}x "
            f"| {ms(measured['scrape']['median_s'])} | {ms(measured['scrape']['p95_s'])} "
            f"| {ms(measured['floor']['median_s'])} | {ms(measured['floor']['p95_s'])} "
            f"| {f'{first:.2f} s' if first is not None else '-'} | {up} "
            f"| {measured['rss_mib']:.1f} ({_peak(measured)}) | {_pss(measured)} "
            f"| {measured.get('connections', '-')} |"
        )
    return lines


def cpu_table(report: dict[str, Any]) -> list[str]:
    """Where a scrape's CPU time goes, against the floor's (means per call), and the least
    wall time that CPU allows (`least_wall`): the part of the ratio that is CPU, and the
    part that is cores left idle."""
    machine = report.get("machine", {})
    cores, apart = machine.get("cores") or 1, bool(machine.get("apart"))
    lines = [
        "CPU time per call, mean (server: the database server's; client: the exporter's"
        " process, or the benchmark's own for the floor). Least wall: the shortest a call"
        f" with that CPU can take on {cores} cores"
        f"{', the server on one of its own' if apart else ' shared'} (`least_wall`);"
        " least ratio: the scrape's least wall over the floor's median; idle: the scrape's"
        " median over its least wall.",
        "",
        "| case | exporter | floor server | floor client | scrape server | scrape client "
        "| floor least wall | scrape least wall | least ratio | idle |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for setup, by_exporter in report.get("floor_many", {}).items():
        for name, measured in by_exporter.items():
            cpu = measured.get("cpu_s") or {}
            if cpu:
                floor_least = least_wall(
                    cpu["floor_server_s"], cpu["floor_client_s"], cores, apart=apart
                )
                scrape_least = least_wall(
                    cpu["scrape_server_s"],
                    cpu["scrape_client_s"],
                    cores,
                    apart=apart,
                    processes=measured.get("processes", 1),
                )
                floor_median = measured["floor"]["median_s"]
                lines.append(
                    f"| {setup} | {name} | {ms(cpu['floor_server_s'])} "
                    f"| {ms(cpu['floor_client_s'])} | {ms(cpu['scrape_server_s'])} "
                    f"| {ms(cpu['scrape_client_s'])} | {ms(floor_least)} "
                    f"| {ms(scrape_least)} | {scrape_least / floor_median:.2f}x "
                    f"| {measured['scrape']['median_s'] / scrape_least:.2f}x |"
                )
    return lines


def least_wall(
    server_s: float, client_s: float, cores: int, *, apart: bool, processes: int = 1
) -> float:
    """The shortest wall time a call can take that uses `server_s` of the database
    server's CPU and `client_s` of its client's, `processes` in each of which one thread
    runs Python at a time: no less than the client's CPU spread over them (on the cores
    there are), nor than all of it spread over the cores; the server on a core of its own
    (`apart`), no less than the server's either."""
    client_cores = max(1, min(processes, cores - 1 if apart else cores))
    if apart:
        return max(server_s, client_s / client_cores)
    return max(client_s / client_cores, (server_s + client_s) / cores)


def replay_table(report: dict[str, Any]) -> list[str]:
    """The server's CPU for one scrape's statements sent again without the exporter."""
    lines = [
        "One scrape's statements sent again without the exporter, on as many connections,"
        " in turn with the floor (bench/replay.py; wall median, the server's CPU mean):",
        "",
        "| case | exporter | statements | connections | replayed wall | replayed server CPU "
        "| floor wall | floor server CPU | server CPU ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for setup, by_exporter in report.get("floor_many", {}).items():
        for name, measured in by_exporter.items():
            replayed = measured.get("replayed")
            if replayed:
                floor_cpu = replayed["floor_server_cpu_s"]
                ratio = replayed["server_cpu_s"] / floor_cpu if floor_cpu else float("nan")
                lines.append(
                    f"| {setup} | {name} | {replayed['statements']:,} "
                    f"| {replayed['connections']} | {ms(replayed['wall_s'])} "
                    f"| {ms(replayed['server_cpu_s'])} | {ms(replayed['floor_wall_s'])} "
                    f"| {ms(replayed['floor_server_cpu_s'])} | {ratio:.2f}x |"
                )
    return lines


def floor_targets(report: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """Issue 40's targets, judged on this checkout's exporter."""
    checks: list[tuple[str, bool | None, str]] = []
    stores = report.get("floor_stores", [])
    if stores:
        largest, smallest = stores[-1], stores[0]
        at_10m = True if largest["actions"] >= 10_000_000 else None
        ratio = largest["exporter"]["ratio_median"]
        growth = (
            largest["exporter"]["scrape"]["median_s"] / smallest["exporter"]["scrape"]["median_s"]
        )
        checks += [
            (
                f"{largest['store']}: scrape <= 1.3 x its floor",
                at_10m and ratio <= 1.3,
                f"{ratio:.2f}x",
            ),
            (
                f"scrape at {largest['store']} <= 1.2 x at {smallest['store']}",
                at_10m and growth <= 1.2,
                f"{growth:.2f}x",
            ),
        ]
    for setup, by_exporter in report.get("floor_many", {}).items():
        ours = by_exporter["exporter"]
        if setup in NOT_JUDGED:
            continue  # in the tables: the targets are judged at the defaults
        checks += [
            (
                f"{setup}: median <= 1.2 x the floor",
                ours["ratio_median"] <= 1.2,
                f"{ours['ratio_median']:.2f}x",
            ),
            (
                f"{setup}: p95 <= 1.5 x the floor",
                ours["ratio_p95"] <= 1.5,
                f"{ours['ratio_p95']:.2f}x",
            ),
            (
                f"{setup}: first scrape <= 5 s",
                ours["first_scrape_s"] <= 5,
                f"{ours['first_scrape_s']:.2f} s",
            ),
            (f"{setup}: all up", ours["sites_up"] == ours["sites"], f"{ours['sites_up']:,}"),
            # The most it held, the first scrapes and the heavy tier's refresh included:
            # what a container's memory limit meets (the chart's is 160Mi).
            (
                f"{setup}: memory <= 150 MB at its peak",
                ours["rss_peak_mib"] <= 150 / 1.048576,
                f"{ours['rss_peak_mib']:.0f} MiB (after the scrapes {ours['rss_mib']:.0f} MiB)",
            ),
            (
                f"{setup}: connections <= {CONNECTIONS}",
                ours["connections"] <= CONNECTIONS,
                str(ours["connections"]),
            ),
        ]
    return checks


def _names(store: dict[str, Any]) -> Iterator[tuple[str, None]]:
    for name in ("exporter", "baseline"):
        if name in store:
            yield name, None


def _pss(measured: dict[str, Any]) -> str:
    """The processes' proportional memory, summed (each page shared between them once)."""
    pss = measured.get("pss_mib")
    return f"{pss:.1f}" if pss is not None else "-"


def _peak(measured: dict[str, Any]) -> str:
    peak = measured.get("rss_peak_mib")
    return f"{peak:.1f}" if peak is not None else "-"
