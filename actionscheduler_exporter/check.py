"""`actionscheduler-exporter check`: a one-shot, readable view of each site's queue."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from actionscheduler_exporter.config import ExporterConfig
from actionscheduler_exporter.logs import printable
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator

# The exit status of a check that found a site unhealthy.
EXIT_UNHEALTHY = 1

_COLUMNS = (
    "SITE",
    "UP",
    # Named for what they count: the due backlog unclaimed and claimed (the groups' table
    # has them together), and the failed actions the table keeps (not a rate).
    "DUE-UNCLAIMED",
    "DUE-CLAIMED",
    "OLDEST DUE",
    "RUNNING",
    "LONGEST RUN",
    "CLAIMS",
    "ORPHANED",
    "STALE",
    "FAILED-KEPT",
)


_GROUP_COLUMNS = ("SITE", "GROUP", "DUE-ALL", "OLDEST DUE")
# Groups listed per site: the ones waiting longest.
WORST_GROUPS = 5


def report(results: Sequence[SiteResult]) -> str:
    """The report; names and problems from the database (a site, a group) have their
    control characters escaped: a newline or an ANSI escape in a database name cannot
    start a forged line or colour the terminal."""
    lines = _table([_COLUMNS, *(_row(result) for result in results)])
    for result in results:
        lines.extend(printable(f"{result.label}: {problem}") for problem in result.problems)
    groups = [row for result in results for row in _worst_groups(result)]
    if groups:
        lines += ["", *_table([_GROUP_COLUMNS, *groups])]
    return "\n".join(lines) + "\n"


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    rows = [tuple(printable(cell) for cell in row) for row in rows]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _worst_groups(result: SiteResult) -> list[tuple[str, ...]]:
    """The groups whose oldest due action has waited longest (the due backlog split)."""
    due: dict[str, float] = {}
    ages: dict[str, float] = {}
    for item in result.samples:
        if item.metric is catalog.DUE_BY_GROUP:
            due[dict(item.labels)["group"]] = item.value
        elif item.metric is catalog.OLDEST_DUE_AGE_BY_GROUP:
            ages[dict(item.labels)["group"]] = item.value
    waiting = sorted(
        (group for group, count in due.items() if count > 0),
        key=lambda group: (-ages.get(group, 0.0), -due[group], group),
    )
    return [
        (result.label, group or '""', f"{due[group]:.0f}", format_age(ages.get(group, 0.0)))
        for group in waiting[:WORST_GROUPS]
    ]


def healthy(results: Sequence[SiteResult]) -> bool:
    return bool(results) and all(result.up for result in results)


def _row(result: SiteResult) -> tuple[str, ...]:
    if not result.up:
        return (result.label, "no", *(["-"] * (len(_COLUMNS) - 2)))

    def number(metric: catalog.MetricDef, **labels: str) -> str:
        value = result.value(metric.name, **labels)
        return "-" if value is None else f"{value:.0f}"

    def age(metric: catalog.MetricDef) -> str:
        value = result.value(metric.name)
        return "-" if value is None else format_age(value)

    claims = number(catalog.ACTIVE_CLAIMS)
    limit = result.value(catalog.CONCURRENT_BATCHES_LIMIT.name)
    if limit is not None:
        claims += f"/{limit:.0f}"
    failed = result.value(catalog.ACTIONS.name, status="failed")
    return (
        result.label,
        "yes",
        number(catalog.DUE_ACTIONS, claim="unclaimed"),
        number(catalog.DUE_ACTIONS, claim="claimed"),
        age(catalog.OLDEST_DUE_AGE),
        number(catalog.IN_PROGRESS),
        age(catalog.OLDEST_IN_PROGRESS_AGE),
        claims,
        number(catalog.ORPHANED_CLAIMS),
        number(catalog.STALE_CLAIMED_PENDING),
        "-" if failed is None else f"{failed:.0f}",
    )


def format_age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def run(config: ExporterConfig, timeout: float) -> int:
    """`actionscheduler-exporter check`: one scrape, its report on stdout; the exit status
    says whether every site is healthy."""
    coordinator = Coordinator(config)
    try:
        results = coordinator.scrape(timeout)
    finally:
        coordinator.close()
    sys.stdout.write(report(results))
    return 0 if healthy(results) else EXIT_UNHEALTHY
