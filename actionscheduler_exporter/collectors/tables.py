"""Size of the four tables, from the server's statistics (read once per round, no COUNT)."""

from __future__ import annotations

from collections.abc import Iterator

from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, DatabaseContext


class TablesCollector(Collector):
    """InnoDB's TABLE_ROWS is an estimate; good enough to see a 100-million-row log table."""

    name = "tables"
    reports_duration = False  # its values come from the hot statement
    metrics = (catalog.TABLE_ROWS, catalog.TABLE_SIZE)

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        if context.stats_error is not None:
            raise context.stats_error
        for table, stats in sorted(context.table_stats.items()):
            yield sample(catalog.TABLE_ROWS, stats.rows, table=table)
            yield sample(catalog.TABLE_SIZE, stats.size_bytes, table=table)
