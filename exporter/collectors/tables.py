"""Size of the four tables, from the server's statistics (read once per round, no COUNT)."""

from __future__ import annotations

from collections.abc import Iterator

from exporter import catalog
from exporter.collectors.base import Collector, Sample, SiteContext, sample


class TablesCollector(Collector):
    """InnoDB's TABLE_ROWS is an estimate; good enough to see a 100-million-row log table."""

    name = "tables"
    metrics = (catalog.TABLE_ROWS, catalog.TABLE_SIZE)

    def collect(self, context: SiteContext) -> Iterator[Sample]:
        for table, stats in sorted(context.table_stats.items()):
            yield sample(catalog.TABLE_ROWS, stats.rows, table=table)
            yield sample(catalog.TABLE_SIZE, stats.size_bytes, table=table)
