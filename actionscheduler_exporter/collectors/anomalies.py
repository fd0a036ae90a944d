"""What a healthy queue does not hold: the traces dead workers leave (claim rows without
open actions, claimed actions the cleaner will reset) and pending actions without a
usable date (the zero date, NULL).

They change over minutes, not seconds (the alerts on them look back half an hour), and
the floor of a thousand stores' scrape does not read them (docs/performance.md): so they
are read about every `anomalies_interval` (a minute by default; 0: every round, in the
hot statement), each table prefix at its own point of it, and served from that reading in
between. The exporter reads them apart from the hot statement, which keeps a store's hot
statement the one its server's read-ahead reads with other stores'
(`rounds.database_round`), and with the anomalies of the server's other stores whose
reading comes due within a quarter of the interval (`db.refresh_together`); a round
without a server's lane (`check`) adds them to its hot statement.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, TableNames
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext
from actionscheduler_exporter.sources.source import Freshness, in_round_every


class AnomaliesCollector(Collector):
    name = "anomalies"
    reports_duration = False  # its values come from the hot statement
    metrics = (catalog.ORPHANED_CLAIMS, catalog.STALE_CLAIMED_PENDING, catalog.UNDATED_PENDING)

    def freshness(self, site: SiteConfig) -> Freshness:
        return in_round_every(site.anomalies_interval)

    def columns(self, context: DatabaseContext) -> Columns:
        return _anomalies_columns(context.tables, int(context.site.timeout_period))

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        orphaned, stale, zero_dated, null_dated = context.values_of(self)
        yield sample(catalog.ORPHANED_CLAIMS, orphaned)
        yield sample(catalog.STALE_CLAIMED_PENDING, stale)
        yield sample(catalog.UNDATED_PENDING, zero_dated, date="zero")
        yield sample(catalog.UNDATED_PENDING, null_dated, date="null")


@functools.lru_cache(maxsize=4096)
def _anomalies_columns(tables: TableNames, timeout: int) -> Columns:
    pending = f"FROM {tables.actions} WHERE status = 'pending'"
    return Columns(
        (
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
            # Zero-dated ones compare as past: Action Scheduler claims them.
            f"SELECT COUNT(*) {pending} AND scheduled_date_gmt < %s",
            # NULL-dated ones are never claimed.
            f"SELECT COUNT(*) {pending} AND scheduled_date_gmt IS NULL",
        ),
        (timeout, timeout, VALID_DATE_FLOOR),
    )
