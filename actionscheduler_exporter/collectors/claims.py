"""Claims: concurrency as the runner counts it, and how old the oldest claim is."""

from __future__ import annotations

import functools

from actionscheduler_exporter.collectors.claimed import claimed_open_actions
from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, TableNames, seconds
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, whole_sample
from actionscheduler_exporter.sources.database import (
    Collector,
    Columns,
    DatabaseContext,
    values_together,
)


class ClaimsCollector(Collector):
    """Claims as the runner counts them, every round; the traces dead workers leave
    (orphaned claim rows, stale claimed actions) change over minutes and are read by
    `anomalies`, about once a minute."""

    name = "claims"
    reports_duration = False  # its values come from the hot statement
    metrics = (catalog.ACTIVE_CLAIMS, catalog.CLAIM_ROWS, catalog.OLDEST_CLAIM_AGE)

    def columns(self, context: DatabaseContext) -> Columns:
        return _claims_columns(context.tables)

    def same_samples_for(self, values: Row) -> bool:
        return True  # the oldest claim's age is the server's (TIMESTAMPDIFF)

    def read(self, context: DatabaseContext) -> tuple[Sample, ...]:
        _, active, rows, oldest = context.values_of(self)
        return (
            whole_sample(catalog.ACTIVE_CLAIMS, active),
            whole_sample(catalog.CLAIM_ROWS, rows),
            whole_sample(catalog.OLDEST_CLAIM_AGE, seconds(oldest)),
        )


@functools.lru_cache(maxsize=4096)
def _claims_columns(tables: TableNames) -> Columns:
    """Index-bounded scalar subqueries (a network of a thousand subsites reads these for
    each of them: statements, not rows, are the cost there): the active claims from the
    pass the due collector's claimed due actions come from (`collectors.claimed`), the
    claim rows and the oldest of them in one pass over the claims table's
    date_created_gmt index (a row per live or orphaned claim). Made once per prefix."""
    return Columns(
        (
            claimed_open_actions(tables.actions),
            values_together(
                f"FROM {tables.claims}",
                "COUNT(*)",
                "TIMESTAMPDIFF(SECOND,"
                " MIN(CASE WHEN date_created_gmt >= %s THEN date_created_gmt END),"
                " UTC_TIMESTAMP())",
            ),
        ),
        (VALID_DATE_FLOOR,),
        # The claimed due actions, the due collector's; the oldest claim, of none.
        nullable=frozenset({0, 3}),
        widths=(2, 2),
    )
