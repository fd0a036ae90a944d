"""The due backlog (the autoscaling signal) and how long its oldest action has waited."""

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


class DueCollector(Collector):
    """Pending actions Action Scheduler would claim now: scheduled_date_gmt <= UTC now.

    That includes rows with the zero date (they compare as past), which Action Scheduler
    does claim; their age comes from their first log row ("action created"), found by
    position rather than by its translated text. Rows with a NULL date are never claimed.
    """

    name = "due"
    metrics = (catalog.DUE_ACTIONS, catalog.UNDATED_PENDING, catalog.OLDEST_DUE_AGE)

    def collect(self, context: SiteContext) -> Iterator[Sample]:
        unclaimed, unclaimed_zero, unclaimed_age = self._due(context, "claim_id = 0")
        claimed, claimed_zero, claimed_age = self._due(context, "claim_id > 0")
        (null_dated,) = context.one(
            f"SELECT COUNT(*) FROM {context.tables.actions}"
            " WHERE status = 'pending' AND scheduled_date_gmt IS NULL"
        )
        oldest = max(unclaimed_age, claimed_age)
        zero_dated = unclaimed_zero + claimed_zero
        if zero_dated:
            oldest = max(oldest, self._zero_dated_age(context))

        yield sample(catalog.DUE_ACTIONS, unclaimed, claim="unclaimed")
        yield sample(catalog.DUE_ACTIONS, claimed, claim="claimed")
        yield sample(catalog.UNDATED_PENDING, zero_dated, date="zero")
        yield sample(catalog.UNDATED_PENDING, null_dated, date="null")
        yield sample(catalog.OLDEST_DUE_AGE, oldest)

    @staticmethod
    def _due(context: SiteContext, claim_condition: str) -> tuple[int, int, float]:
        """Count, zero-dated count and age of the oldest dated one, of due pending actions.

        The claim condition comes first so that the (claim_id, status, scheduled_date_gmt)
        index answers from the index alone: with a million due actions, a read of each row
        would cost more than the whole scrape may.
        """
        count, zero_dated, age = context.one(
            "SELECT COUNT(*), COALESCE(SUM(scheduled_date_gmt < %s), 0),"
            " TIMESTAMPDIFF(SECOND,"
            "   MIN(CASE WHEN scheduled_date_gmt >= %s THEN scheduled_date_gmt END),"
            "   UTC_TIMESTAMP())"
            f" FROM {context.tables.actions}"
            f" WHERE {claim_condition} AND status = 'pending'"
            " AND scheduled_date_gmt <= UTC_TIMESTAMP()",
            (VALID_DATE_FLOOR, VALID_DATE_FLOOR),
        )
        return int(count), int(zero_dated), seconds(age)

    @staticmethod
    def _zero_dated_age(context: SiteContext) -> float:
        tables = context.tables
        (age,) = context.one(
            "SELECT TIMESTAMPDIFF(SECOND, MIN(l.log_date_gmt), UTC_TIMESTAMP())"
            f" FROM {tables.actions} a JOIN {tables.logs} l ON l.action_id = a.action_id"
            " WHERE a.status = 'pending' AND a.scheduled_date_gmt < %s"
            " AND l.log_date_gmt >= %s",
            (VALID_DATE_FLOOR, VALID_DATE_FLOOR),
        )
        return seconds(age)
