"""One module per group of metric families, all behind the Collector interface."""

from actionscheduler_exporter.collectors.claims import ClaimsCollector
from actionscheduler_exporter.collectors.due import DueCollector
from actionscheduler_exporter.collectors.due_split import DueSplitCollector
from actionscheduler_exporter.collectors.failures import FailuresCollector
from actionscheduler_exporter.collectors.in_progress import InProgressCollector
from actionscheduler_exporter.collectors.recurring import RecurringCollector
from actionscheduler_exporter.collectors.retention import RetentionCollector
from actionscheduler_exporter.collectors.status import StatusCollector
from actionscheduler_exporter.collectors.table_sizes import TableSizesCollector
from actionscheduler_exporter.sources.database import Collector


def default_collectors() -> tuple[Collector, ...]:
    """Every collector, in the order a round runs them: the autoscaling signal first."""
    return (
        DueCollector(),
        DueSplitCollector(),
        InProgressCollector(),
        ClaimsCollector(),
        StatusCollector(),
        FailuresCollector(),
        RecurringCollector(),
        RetentionCollector(),
        TableSizesCollector(),
    )


__all__ = ["Collector", "default_collectors"]
