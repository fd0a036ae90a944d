"""Classic against native histograms, side by side in one run: the series each form costs
per store, the bytes of a scrape, and the time to write it (median of N renders of the
same results, the formats interleaved so that each sees the same machine).

    python -m bench.native                # 100 stores, 15 renders per format
    python -m bench.native --stores 1000 --renders 5

The stores' histograms are filled by the exporter's own `Histogram` (as the log events
collector fills them) at the default top-N limits: 20 groups and 20 hooks plus `other`,
with 5,000 starts and runs per store whose delays have the shape of a real queue (mostly
on time, a long tail). Beside them, the log counters of 40 (hook, group) pairs, so that a
scrape is not histograms only. No database: what differs between the forms is the
exposition, and the rest of a scrape is the same for both.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import time
from typing import Any

from actionscheduler_exporter.collectors.log_events.collector import (
    RUN_DURATION_BUCKETS,
    START_DELAY_BUCKETS,
)
from actionscheduler_exporter.collectors.log_events.histogram import Histogram
from actionscheduler_exporter.exposition.render import OPENMETRICS, PROTOBUF, TEXT, render
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.native import HistogramCount
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.rounds.result import SiteResult

LABELS = 21  # top_hooks / top_groups (20) and "other"
EVENTS = 5_000
PAIRS = 40
HISTOGRAMS = {catalog.START_DELAY, catalog.RUN_DURATION, catalog.START_DELAY_BY_HOOK}


def store(index: int, *, classic: bool) -> SiteResult:
    rng = random.Random(index)
    delays = Histogram(catalog.START_DELAY, START_DELAY_BUCKETS, classic)
    by_hook = Histogram(catalog.START_DELAY_BY_HOOK, (), native_only=True)
    runs = Histogram(catalog.RUN_DURATION, RUN_DURATION_BUCKETS, classic)
    names = [f"hook_{n}" for n in range(LABELS - 1)] + ["other"]
    groups = [f"group_{n}" for n in range(LABELS - 1)] + ["other"]
    for _ in range(EVENTS):
        hook = names[min(int(rng.paretovariate(1.2)) - 1, LABELS - 1)]
        group = groups[min(int(rng.paretovariate(1.2)) - 1, LABELS - 1)]
        delay = rng.choice((0, 0, 1, 2)) if rng.random() < 0.5 else int(rng.expovariate(1 / 120))
        delays.observe((("group", group),), delay)
        by_hook.observe((("hook", hook),), delay)
        runs.observe((("hook", hook),), int(rng.expovariate(1 / 20)))
    samples: list[Sample] = [*delays.samples(), *by_hook.samples(), *runs.samples()]
    for pair in range(PAIRS):
        labels = (("hook", names[pair % LABELS]), ("group", groups[pair // 2 % LABELS]))
        for metric in (catalog.CREATED, catalog.STARTED, catalog.COMPLETED):
            samples.append(Sample(metric, rng.randint(0, 10**6), labels))
        for reason in catalog.FAILURE_REASONS:
            samples.append(
                Sample(catalog.FAILED, rng.randint(0, 100), (*labels, ("reason", reason)))
            )
    return SiteResult(f"store-{index}", (("team", "bench"),), True, samples)


def series(result: SiteResult) -> dict[str, int]:
    """Series of the histogram families Prometheus stores from each form of one store."""
    own = [item for item in result.samples if item.metric in HISTOGRAMS]
    classic = sum(1 for item in own if item.metric not in catalog.NATIVE_ONLY)
    native = sum(1 for item in own if isinstance(item, HistogramCount))
    by_group = sum(
        1 for item in own if isinstance(item, HistogramCount) and item.metric is catalog.START_DELAY
    )
    return {
        "classic (text, or protobuf without native histograms)": classic,
        "native (classic_histograms: false)": native,
        "both (migration: scrape_classic_histograms)": classic + native,
        "start delay by group, classic": by_group * (len(START_DELAY_BUCKETS) + 3),
        "start delay by hook, native": native - 2 * by_group,
    }


def native_case(stores: int = 100, renders: int = 15) -> dict[str, Any]:
    """The series per store and, per form, the bytes and the median render."""
    both = [store(index, classic=True) for index in range(stores)]
    native_only = [store(index, classic=False) for index in range(stores)]
    forms: dict[str, tuple[list[SiteResult], str]] = {
        "text 0.0.4": (both, TEXT),
        "OpenMetrics": (both, OPENMETRICS),
        "protobuf, native + classic": (both, PROTOBUF),
        "protobuf, native only": (native_only, PROTOBUF),
    }
    times: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(renders):  # interleaved: every form sees the same machine
        for name, (results, accept) in forms.items():
            started = time.perf_counter()
            render(results, accept)
            times[name].append(time.perf_counter() - started)
    rows = []
    for name, (results, accept) in forms.items():
        body = render(results, accept)[0]
        rows.append(
            {
                "form": name,
                "bytes per store": len(body) // stores,
                "gzip bytes per store": len(gzip.compress(body, 1)) // stores,
                "median render ms": round(statistics.median(times[name]) * 1000, 1),
            }
        )
    return {
        "stores": stores,
        "renders": renders,
        "series per store": series(both[0]),
        "scrape": rows,
    }


def table(report: dict[str, Any]) -> list[str]:
    lines = [
        f"{report['stores']} stores, median of {report['renders']} renders",
        "",
        "| form | bytes per store | gzip bytes per store | median render (all stores) |",
        "| --- | --- | --- | --- |",
    ]
    for row in report["scrape"]:
        lines.append(
            f"| {row['form']} | {row['bytes per store']:,} | {row['gzip bytes per store']:,} "
            f"| {row['median render ms']} ms |"
        )
    lines += ["", "| histogram series per store | |", "| --- | --- |"]
    lines += [f"| {name} | {count} |" for name, count in report["series per store"].items()]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=100)
    parser.add_argument("--renders", type=int, default=15)
    arguments = parser.parse_args()
    report = native_case(arguments.stores, arguments.renders)
    print(json.dumps(report, indent=2))
    print("\n".join(table(report)))


if __name__ == "__main__":
    main()
