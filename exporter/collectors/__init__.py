"""One module per group of metric families, all behind the Collector interface."""

from exporter.collectors.base import Collector
from exporter.collectors.claims import ClaimsCollector
from exporter.collectors.due import DueCollector
from exporter.collectors.failures import FailuresCollector
from exporter.collectors.in_progress import InProgressCollector
from exporter.collectors.retention import RetentionCollector
from exporter.collectors.status import StatusCollector
from exporter.collectors.tables import TablesCollector


def default_collectors() -> tuple[Collector, ...]:
    """Every collector, in the order a round runs them: the autoscaling signal first."""
    return (
        DueCollector(),
        InProgressCollector(),
        ClaimsCollector(),
        StatusCollector(),
        FailuresCollector(),
        RetentionCollector(),
        TablesCollector(),
    )


__all__ = ["Collector", "default_collectors"]
