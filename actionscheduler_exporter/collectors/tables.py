"""Size of the four tables, from the server's statistics (read once per round, no COUNT)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

from actionscheduler_exporter.db.tables import TableStats
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, DatabaseContext


class TablesCollector(Collector):
    """InnoDB's TABLE_ROWS is an estimate; good enough to see a 100-million-row log table."""

    name = "tables"
    reports_duration = False  # its values come from the hot statement
    metrics = (catalog.TABLE_ROWS, catalog.TABLE_SIZE)

    def __init__(self) -> None:
        # The samples made of each prefix's statistics, kept while the round serves the
        # same statistics (about five minutes): the same samples, written once.
        self._made: dict[str, tuple[Mapping[str, TableStats], tuple[Sample, ...]]] = {}

    def read(self, context: DatabaseContext) -> tuple[Sample, ...]:
        if context.stats_error is not None:
            raise context.stats_error
        stats, prefix = context.table_stats, context.tables.prefix
        made = self._made.get(prefix)
        if made is not None and made[0] is stats:
            return made[1]
        samples = tuple(self._samples(stats))
        self._made[prefix] = (stats, samples)
        return samples

    def retain(self, prefixes: Collection[str]) -> None:
        for gone in self._made.keys() - set(prefixes):
            del self._made[gone]

    @staticmethod
    def _samples(table_stats: Mapping[str, TableStats]) -> Iterator[Sample]:
        for table, stats in sorted(table_stats.items()):
            yield sample(catalog.TABLE_ROWS, stats.rows, table=table)
            yield sample(catalog.TABLE_SIZE, stats.size_bytes, table=table)
