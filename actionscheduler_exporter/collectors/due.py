"""The due backlog (the autoscaling signal) and how long its oldest action has waited."""

from __future__ import annotations

import functools

from actionscheduler_exporter.collectors.claimed import claimed_open_actions
from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, seconds
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, labels_of, whole_sample
from actionscheduler_exporter.sources.database import (
    Collector,
    Columns,
    DatabaseContext,
    values_together,
)
from actionscheduler_exporter.sources.source import Reading

# What the oldest-due column holds when the oldest due action has the zero date.
_ZERO_DATED = -1
# The claim labels, made once: every store's round makes these samples.
_UNCLAIMED = labels_of(catalog.DUE_ACTIONS, claim="unclaimed")
_CLAIMED = labels_of(catalog.DUE_ACTIONS, claim="claimed")


class DueCollector(Collector):
    """Pending actions Action Scheduler would claim now: scheduled_date_gmt <= UTC now.
    That includes rows with the zero date (they compare as past), which Action Scheduler
    does claim; their age comes from their first log row ("action created"), found by
    position rather than by its translated text. Rows with a NULL date are never claimed
    (counted, with the zero-dated ones, by `anomalies`).
    """

    name = "due"
    reports_duration = False  # its values come from the hot statement
    metrics = (catalog.DUE_ACTIONS, catalog.OLDEST_DUE_AGE)

    def columns(self, context: DatabaseContext) -> Columns:
        return _due_columns(context.tables.actions)

    def same_samples_for(self, values: Row) -> bool:
        # The oldest age is the server's, unless zero-dated actions are due: then it is
        # read from the log, and grows with the clock.
        return bool(values[1] != _ZERO_DATED)

    def read(self, context: DatabaseContext) -> tuple[Sample, ...]:
        due, oldest, claimed, _ = context.values_of(self)
        # One statement's subqueries share one read view: the difference is exact.
        unclaimed = max(0, int(due) - int(claimed))
        age = seconds(oldest)
        if oldest is not None and int(oldest) == _ZERO_DATED:
            age = self._zero_dated_oldest(context)
        return (
            whole_sample(catalog.DUE_ACTIONS, unclaimed, _UNCLAIMED),
            whole_sample(catalog.DUE_ACTIONS, claimed, _CLAIMED),
            whole_sample(catalog.OLDEST_DUE_AGE, age),
        )

    @staticmethod
    def _zero_dated_oldest(context: DatabaseContext) -> float:
        """The oldest due age when zero-dated actions are due: the older of the oldest
        dated one and the zero-dated ones' first log rows."""
        tables = context.tables
        dated, zero_dated = context.one(
            "SELECT (SELECT TIMESTAMPDIFF(SECOND, MIN(scheduled_date_gmt), UTC_TIMESTAMP())"
            f" FROM {tables.actions} WHERE status = 'pending'"
            " AND scheduled_date_gmt BETWEEN %s AND UTC_TIMESTAMP()),"
            " (SELECT TIMESTAMPDIFF(SECOND, MIN(l.log_date_gmt), UTC_TIMESTAMP())"
            f" FROM {tables.actions} a JOIN {tables.logs} l ON l.action_id = a.action_id"
            " WHERE a.status = 'pending' AND a.scheduled_date_gmt < %s"
            " AND l.log_date_gmt >= %s)",
            (VALID_DATE_FLOOR, VALID_DATE_FLOOR, VALID_DATE_FLOOR),
        )
        return max(seconds(dated), seconds(zero_dated))


@functools.lru_cache(maxsize=4096)
def _due_columns(actions: str) -> Columns:
    """Every due action and the oldest of them, in one pass over the (status,
    scheduled_date_gmt) index, where they are one contiguous range whose first entry is
    the oldest; the claimed ones from (claim_id, status, scheduled_date_gmt), in the pass
    the claims collector's active claims come from (`collectors.claimed`, sent once for
    both): each read from an index alone, as the floor's are (docs/performance.md). The
    oldest is the first entry of the range, so a zero-dated action, when there is one, is
    that entry: then the column says so (-1) and its age is read apart
    (`_zero_dated_oldest`), which a healthy store never needs. Made once per table (the
    same in every round)."""
    due = f"FROM {actions} WHERE status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP()"
    return Columns(
        (
            values_together(
                due,
                "COUNT(*)",
                f"IF(MIN(scheduled_date_gmt) < %s, {_ZERO_DATED},"
                " TIMESTAMPDIFF(SECOND, MIN(scheduled_date_gmt), UTC_TIMESTAMP()))",
            ),
            claimed_open_actions(actions),
        ),
        (VALID_DATE_FLOOR,),
        # The oldest, when nothing is due; the active claims, the claims collector's.
        nullable=frozenset({1, 3}),
        widths=(2, 2),
    )


def due_total(reading: Reading | None) -> int | None:
    """Every due action, from a reading of the due collector (None: not read this round)."""
    if reading is None or not reading.ok:
        return None
    return int(sum(item.value for item in reading.samples if item.metric is catalog.DUE_ACTIONS))


def oldest_due_age(reading: Reading | None) -> float | None:
    """The oldest due action's age, from a reading of the due collector (None: not read
    this round)."""
    if reading is None or not reading.ok:
        return None
    for item in reading.samples:
        if item.metric is catalog.OLDEST_DUE_AGE:
            return item.value
    return None
