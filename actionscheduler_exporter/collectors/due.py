"""The due backlog (the autoscaling signal) and how long its oldest action has waited."""

from __future__ import annotations

from collections.abc import Iterator

from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, seconds
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext
from actionscheduler_exporter.sources.source import Reading


class DueCollector(Collector):
    """Pending actions Action Scheduler would claim now: scheduled_date_gmt <= UTC now.

    That includes rows with the zero date (they compare as past), which Action Scheduler
    does claim; their age comes from their first log row ("action created"), found by
    position rather than by its translated text. Rows with a NULL date are never claimed.
    """

    name = "due"
    reports_duration = False  # its values come from the hot statement
    metrics = (catalog.DUE_ACTIONS, catalog.UNDATED_PENDING, catalog.OLDEST_DUE_AGE)

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        (
            unclaimed,
            unclaimed_zero,
            unclaimed_age,
            claimed,
            claimed_zero,
            claimed_age,
            null_dated,
        ) = context.values_of(self)
        oldest = max(seconds(unclaimed_age), seconds(claimed_age))
        zero_dated = int(unclaimed_zero) + int(claimed_zero)
        if zero_dated:
            oldest = max(oldest, self._zero_dated_age(context))

        yield sample(catalog.DUE_ACTIONS, unclaimed, claim="unclaimed")
        yield sample(catalog.DUE_ACTIONS, claimed, claim="claimed")
        yield sample(catalog.UNDATED_PENDING, zero_dated, date="zero")
        yield sample(catalog.UNDATED_PENDING, null_dated, date="null")
        yield sample(catalog.OLDEST_DUE_AGE, oldest)

    def columns(self, context: DatabaseContext) -> Columns:
        """Scalar subqueries, each answered by an index range alone.

        The claim condition comes first so that the (claim_id, status, scheduled_date_gmt)
        index holds each set contiguously: the unclaimed due actions are counted without
        reading a row, the oldest is the first entry of its range, and the zero-dated ones
        are a range of their own. Folding these into one pass over the range would cost an
        expression per row (measured in docs/performance.md).
        """
        actions = context.tables.actions
        subqueries: list[str] = []
        args: list[object] = []
        for claim in ("claim_id = 0", "claim_id > 0"):
            pending = f"FROM {actions} WHERE {claim} AND status = 'pending'"
            subqueries += [
                f"SELECT COUNT(*) {pending} AND scheduled_date_gmt <= UTC_TIMESTAMP()",
                f"SELECT COUNT(*) {pending} AND scheduled_date_gmt < %s",
                "SELECT TIMESTAMPDIFF(SECOND, MIN(scheduled_date_gmt), UTC_TIMESTAMP())"
                f" {pending} AND scheduled_date_gmt BETWEEN %s AND UTC_TIMESTAMP()",
            ]
            args += [VALID_DATE_FLOOR, VALID_DATE_FLOOR]
        # NULL-dated pending actions are never claimed: counted apart.
        subqueries.append(
            f"SELECT COUNT(*) FROM {actions} WHERE status = 'pending'"
            " AND scheduled_date_gmt IS NULL"
        )
        # The oldest due of each claim condition is NULL when nothing is due.
        return Columns(tuple(subqueries), tuple(args), nullable=frozenset({2, 5}))

    @staticmethod
    def _zero_dated_age(context: DatabaseContext) -> float:
        tables = context.tables
        (age,) = context.one(
            "SELECT TIMESTAMPDIFF(SECOND, MIN(l.log_date_gmt), UTC_TIMESTAMP())"
            f" FROM {tables.actions} a JOIN {tables.logs} l ON l.action_id = a.action_id"
            " WHERE a.status = 'pending' AND a.scheduled_date_gmt < %s"
            " AND l.log_date_gmt >= %s",
            (VALID_DATE_FLOOR, VALID_DATE_FLOOR),
        )
        return seconds(age)


def due_total(reading: Reading | None) -> int | None:
    """Every due action, from a reading of the due collector (None: not read this round)."""
    if reading is None or not reading.ok:
        return None
    return int(sum(item.value for item in reading.samples if item.metric is catalog.DUE_ACTIONS))
