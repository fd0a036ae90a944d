"""The round's one statement per table prefix: the tables' statistics and every hot
collector's `columns`, in one round trip.

On a small store a statement costs its round trip and the server's and the driver's work
per statement, not rows: a thousand sites' scrape sent five of them per site. One
statement of scalar subqueries instead, split back into each collector's values. When it
fails for any reason but a lost connection, nothing is lost: the statistics are read on
their own and each collector reads its own columns, so a failure is the failing
collector's alone (a lock wait, though, stops the rest of the prefix: see `MonitoredSite`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.db.tables import (
    TableStats,
    parse_table_stats,
    read_table_stats,
    table_stats_column,
)
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext


@dataclass
class HotStatement:
    stats: Mapping[str, TableStats]
    # The collectors' values, by name; empty when the statement failed.
    prefetched: dict[str, Row] = field(default_factory=dict)
    seconds: float = 0.0  # the statement's time, shared by the collectors it served

    def share(self, collector: str) -> float:
        """The part of the statement's time that counts as the collector's duration."""
        if collector not in self.prefetched:
            return 0.0
        return self.seconds / len(self.prefetched)


def read_hot_statement(
    context: DatabaseContext,
    collectors: Sequence[Collector],
    known_stats: Mapping[str, TableStats] | None,
) -> HotStatement:
    """The prefix's statistics (`known_stats` when its network's listing read them) and
    the collectors' columns. Raises QueryError only when the connection is lost, or when
    the statistics cannot be read on their own either."""
    session, tables = context.session, context.tables
    parts: list[tuple[str, Columns]] = []
    for collector in collectors:
        columns = collector.columns(context)
        if columns is not None:
            parts.append((collector.name, columns))
    subqueries: list[str] = []
    args: list[object] = []
    if known_stats is None:
        stats_query, stats_args = table_stats_column(tables)
        subqueries.append(stats_query)
        args += stats_args
    for _, columns in parts:
        subqueries += columns.subqueries
        args += columns.args
    if not subqueries:
        return HotStatement(known_stats or {})
    started = time.perf_counter()
    try:
        (row,) = session.query(Columns(tuple(subqueries), tuple(args)).statement()[0], args)
    except QueryError as error:
        if error.connection_lost:
            raise
        # Each collector reads its own columns now: a failure is the failing one's alone.
        stats = known_stats if known_stats is not None else read_table_stats(session, tables)
        return HotStatement(stats)
    seconds = time.perf_counter() - started
    values = list(row)
    stats = known_stats if known_stats is not None else parse_table_stats(tables, values.pop(0))
    prefetched: dict[str, Row] = {}
    for name, columns in parts:
        count = len(columns.subqueries)
        prefetched[name], values = tuple(values[:count]), values[count:]
    return HotStatement(stats, prefetched, seconds)
