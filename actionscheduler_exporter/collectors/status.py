"""Actions by status, and by status and group."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from actionscheduler_exporter.db.schema import STATUSES
from actionscheduler_exporter.db.tables import group_slugs
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.catalog import OTHER
from actionscheduler_exporter.metrics.folding import fold
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, DatabaseContext

# A status Action Scheduler does not write (a plugin's own, or corrupted data) is counted
# under this name instead of being dropped or creating unbounded series.
UNKNOWN_STATUS = "unknown"
NO_GROUP = ""


class StatusCollector(Collector):
    name = "status"
    metrics = (catalog.ACTIONS, catalog.ACTIONS_BY_GROUP, catalog.FOLDED_LABEL_VALUES)

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        totals = context.action_totals().by_status_group
        slugs = group_slugs(context.session, context.tables, (group or 0 for _, group in totals))

        by_status: Counter[str] = Counter(dict.fromkeys(STATUSES, 0))
        by_status_group: Counter[tuple[str, str]] = Counter()
        for (raw_status, group_id), count in totals.items():
            # As Action Scheduler's own queries see it (`schema.status_of`, in the ledger):
            # 'PENDING' and 'pending ' are pending.
            status = raw_status if raw_status in STATUSES else UNKNOWN_STATUS
            group = slugs.get(group_id or 0, NO_GROUP)
            by_status[status] += count
            by_status_group[(status, group)] += count

        for status, count in by_status.items():
            yield sample(catalog.ACTIONS, count, status=status)

        group_totals: Counter[str] = Counter()
        for (_, group), count in by_status_group.items():
            group_totals[group] += count
        kept, folded_values = fold(group_totals, context.site.top_groups)
        folded: Counter[tuple[str, str]] = Counter()
        for (status, group), count in by_status_group.items():
            folded[(status, group if group in kept else OTHER)] += count
        for (status, group), count in sorted(folded.items()):
            yield sample(catalog.ACTIONS_BY_GROUP, count, status=status, group=group)
        yield sample(catalog.FOLDED_LABEL_VALUES, folded_values, label="group")
