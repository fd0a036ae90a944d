"""Running actions, and how long the oldest has run (a killed worker shows here first)."""

from __future__ import annotations

import functools

from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, seconds
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, whole_sample
from actionscheduler_exporter.sources.database import (
    Collector,
    Columns,
    DatabaseContext,
    values_together,
)


class InProgressCollector(Collector):
    """Starting an action sets last_attempt_gmt, so for in-progress rows it is the start time."""

    name = "in_progress"
    reports_duration = False  # its values come from the hot statement
    metrics = (catalog.IN_PROGRESS, catalog.OLDEST_IN_PROGRESS_AGE)

    def columns(self, context: DatabaseContext) -> Columns:
        return _in_progress_columns(context.tables.actions)

    def same_samples_for(self, values: Row) -> bool:
        return True  # the oldest start's age is the server's (TIMESTAMPDIFF)

    def read(self, context: DatabaseContext) -> tuple[Sample, ...]:
        count, age = context.values_of(self)
        return (
            whole_sample(catalog.IN_PROGRESS, count),
            whole_sample(catalog.OLDEST_IN_PROGRESS_AGE, seconds(age)),
        )


@functools.lru_cache(maxsize=4096)
def _in_progress_columns(actions: str) -> Columns:
    """The running actions and the oldest start among them, in one pass over their rows;
    made once per table: the same in every round."""
    return Columns(
        (
            values_together(
                f"FROM {actions} WHERE status = 'in-progress'",
                "COUNT(*)",
                "TIMESTAMPDIFF(SECOND,"
                " MIN(CASE WHEN last_attempt_gmt >= %s THEN last_attempt_gmt END),"
                " UTC_TIMESTAMP())",
            ),
        ),
        (VALID_DATE_FLOOR,),
        nullable=frozenset({1}),  # the oldest start, of none
        widths=(2,),
    )
