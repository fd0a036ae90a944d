"""Failed actions per hook."""

from __future__ import annotations

from collections.abc import Iterator

from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.folding import fold
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, DatabaseContext


class FailuresCollector(Collector):
    name = "failures"
    metrics = (catalog.FAILED_BY_HOOK, catalog.FOLDED_LABEL_VALUES)

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        counts = context.action_totals().failed_by_hook
        folded, folded_values = fold(counts, context.site.top_hooks)
        for hook, count in sorted(folded.items()):
            yield sample(catalog.FAILED_BY_HOOK, count, hook=hook)
        yield sample(catalog.FOLDED_LABEL_VALUES, folded_values, label="hook")
