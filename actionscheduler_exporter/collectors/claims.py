"""Claims: concurrency as the runner counts it, and the traces dead workers leave."""

from __future__ import annotations

from collections.abc import Iterator

from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, seconds
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext


class ClaimsCollector(Collector):
    name = "claims"
    reports_duration = False  # its values come from the hot statement
    metrics = (
        catalog.ACTIVE_CLAIMS,
        catalog.CLAIM_ROWS,
        catalog.OLDEST_CLAIM_AGE,
        catalog.ORPHANED_CLAIMS,
        catalog.STALE_CLAIMED_PENDING,
    )

    def columns(self, context: DatabaseContext) -> Columns:
        """Index-bounded scalar subqueries (a network of a thousand subsites reads these for
        each of them: statements, not rows, are the cost there)."""
        tables = context.tables
        timeout = int(context.site.timeout_period)
        return Columns(
            (
                # The same count as ActionScheduler_Abstract_QueueRunner's claim count,
                # which the runner compares with the concurrent-batches limit.
                f"SELECT COUNT(DISTINCT claim_id) FROM {tables.actions}"
                " WHERE claim_id != 0 AND status IN ('pending', 'in-progress')",
                f"SELECT COUNT(*) FROM {tables.claims}",
                "SELECT TIMESTAMPDIFF(SECOND,"
                " MIN(CASE WHEN date_created_gmt >= %s THEN date_created_gmt END),"
                f" UTC_TIMESTAMP()) FROM {tables.claims}",
                # A healthy batch also has a claim row without open actions for a moment
                # (before its claiming UPDATE, after its last action): only an old one is a
                # dead worker's.
                f"SELECT COUNT(*) FROM {tables.claims} c"
                " WHERE c.date_created_gmt < UTC_TIMESTAMP() - INTERVAL %s SECOND"
                f" AND NOT EXISTS (SELECT 1 FROM {tables.actions} a"
                " WHERE a.claim_id = c.claim_id AND a.status IN ('pending', 'in-progress'))",
                # What the cleaner resets: pending, claimed longer ago than the timeout.
                f"SELECT COUNT(*) FROM {tables.actions}"
                " WHERE claim_id != 0 AND status = 'pending'"
                " AND last_attempt_gmt <= UTC_TIMESTAMP() - INTERVAL %s SECOND",
            ),
            (VALID_DATE_FLOOR, timeout, timeout),
            nullable=frozenset({2}),  # the oldest claim, of none
        )

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        active, rows, oldest, orphaned, stale = context.values_of(self)
        yield sample(catalog.ACTIVE_CLAIMS, active)
        yield sample(catalog.CLAIM_ROWS, rows)
        yield sample(catalog.OLDEST_CLAIM_AGE, seconds(oldest))
        yield sample(catalog.ORPHANED_CLAIMS, orphaned)
        yield sample(catalog.STALE_CLAIMED_PENDING, stale)
