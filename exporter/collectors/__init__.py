"""One module per group of metric families, all behind the Collector interface."""

from exporter.collectors.claims import ClaimsCollector
from exporter.collectors.due import DueCollector
from exporter.collectors.due_split import DueSplitCollector
from exporter.collectors.failures import FailuresCollector
from exporter.collectors.in_progress import InProgressCollector
from exporter.collectors.recurring import RecurringCollector
from exporter.collectors.retention import RetentionCollector
from exporter.collectors.status import StatusCollector
from exporter.collectors.table_sizes import TableSizesCollector
from exporter.sources.database import Collector


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
