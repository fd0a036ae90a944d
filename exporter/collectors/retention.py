"""How far back finished actions reach: a purge that stopped shows here first."""

from __future__ import annotations

from collections.abc import Iterator

from exporter.collectors.context import VALID_DATE_FLOOR, Collector, DatabaseContext, seconds
from exporter.metrics import catalog
from exporter.metrics.samples import Sample, sample


class RetentionCollector(Collector):
    """The cleaner purges complete and canceled actions by last_attempt_gmt.

    Heavy tier: failed actions are kept for months, so reading the last_attempt_gmt index
    in order passes every failed action older than the oldest finished one first.
    """

    name = "retention"
    tier = "heavy"
    metrics = (catalog.OLDEST_FINISHED_AGE,)

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        (age,) = context.one(
            "SELECT TIMESTAMPDIFF(SECOND, last_attempt_gmt, UTC_TIMESTAMP())"
            f" FROM {context.tables.actions}"
            " WHERE status IN ('complete', 'canceled') AND last_attempt_gmt >= %s"
            " ORDER BY last_attempt_gmt LIMIT 1",
            (VALID_DATE_FLOOR,),
        ) or (None,)
        yield sample(catalog.OLDEST_FINISHED_AGE, seconds(age))
