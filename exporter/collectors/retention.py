"""How far back finished actions reach: a purge that stopped shows here first."""

from __future__ import annotations

from collections.abc import Iterator

from exporter import catalog
from exporter.collectors.base import (
    VALID_DATE_FLOOR,
    Collector,
    Sample,
    SiteContext,
    sample,
    seconds,
)


class RetentionCollector(Collector):
    """The cleaner purges complete and canceled actions by last_attempt_gmt.

    Reading the last_attempt_gmt index in order stops at the first finished row, which on
    a real store is near the start: the oldest rows are almost all complete.
    """

    name = "retention"
    metrics = (catalog.OLDEST_FINISHED_AGE,)

    def collect(self, context: SiteContext) -> Iterator[Sample]:
        (age,) = context.one(
            "SELECT TIMESTAMPDIFF(SECOND, last_attempt_gmt, UTC_TIMESTAMP())"
            f" FROM {context.tables.actions}"
            " WHERE status IN ('complete', 'canceled') AND last_attempt_gmt >= %s"
            " ORDER BY last_attempt_gmt LIMIT 1",
            (VALID_DATE_FLOOR,),
        ) or (None,)
        yield sample(catalog.OLDEST_FINISHED_AGE, seconds(age))
