"""How far back finished actions reach: a purge that stopped shows here first."""

from __future__ import annotations

from collections.abc import Iterator

from actionscheduler_exporter.db.schema import seconds
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, DatabaseContext


class RetentionCollector(Collector):
    """The cleaner purges complete and canceled actions by last_attempt_gmt.

    Heavy tier: failed actions are kept for months, so reading the last_attempt_gmt index
    in order passes every failed action older than the oldest finished one first; the
    ledger keeps each chunk's oldest instead.
    """

    name = "retention"
    metrics = (catalog.OLDEST_FINISHED_AGE,)

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        yield sample(
            catalog.OLDEST_FINISHED_AGE, seconds(context.action_totals().oldest_finished_age)
        )
