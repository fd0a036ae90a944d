"""The interface every collector implements, and the samples they return.

A collector owns one group of metric families and the queries behind them. It gets a
SiteContext (a session, the site's table names, its settings), runs its queries and
returns samples; the scrape round times it, records its success and turns its errors
into the error counter. Collectors never keep state between scrapes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from exporter.catalog import MetricDef
from exporter.config.model import SiteConfig
from exporter.db.session import Row, Session
from exporter.db.tables import TableNames, TableStats

Labels = tuple[tuple[str, str], ...]

# Dates before this are Action Scheduler's zero date or other junk that would turn into
# ages of centuries; Action Scheduler did not exist before it.
VALID_DATE_FLOOR = "2000-01-01 00:00:00"


@dataclass(frozen=True)
class Sample:
    metric: MetricDef
    value: float
    labels: Labels = ()
    suffix: str = ""  # _bucket, _sum or _count for histograms

    @property
    def name(self) -> str:
        return self.metric.sample_name + self.suffix


def sample(metric: MetricDef, value: float | int | None, **labels: str) -> Sample:
    """A sample with its labels in the order the metric definition declares them."""
    ordered = tuple((name, labels[name]) for name in metric.labels)
    return Sample(metric, float(value or 0), ordered)


@dataclass(frozen=True)
class SiteContext:
    session: Session
    tables: TableNames
    site: SiteConfig
    table_stats: Mapping[str, TableStats]

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        return self.session.query(sql, args)

    def one(self, sql: str, args: Sequence[object] | None = None) -> Row:
        rows = self.session.query(sql, args)
        return rows[0] if rows else ()


class Tier(Enum):
    """How often a collector's queries run, which follows from what they read."""

    # Every scrape: queries bounded by the due, claimed, in-progress or new log rows
    # (an index range), so they cost the same at any table size.
    HOT = "hot"
    # In the background, at most every `heavy_interval`: queries over all complete or
    # failed actions, whose cost grows with the table.
    HEAVY = "heavy"


class Collector(ABC):
    """A group of metric families gathered by one set of queries."""

    name: ClassVar[str]
    metrics: ClassVar[tuple[MetricDef, ...]]
    tier: ClassVar[Tier] = Tier.HOT

    @abstractmethod
    def collect(self, context: SiteContext) -> Iterable[Sample]: ...


def label_value(raw: Any) -> str:
    """Text for a label from whatever the database returned (bytes included)."""
    if raw is None:
        return ""
    if isinstance(raw, bytes | bytearray):
        return bytes(raw).decode("utf-8", errors="replace")
    # Lone surrogates cannot be written as UTF-8: replace them rather than fail the scrape.
    return str(raw).encode("utf-8", errors="replace").decode("utf-8")


def seconds(raw: Any) -> float:
    """An age column that may be NULL (no rows) or negative (a date in the future)."""
    if raw is None:
        return 0.0
    return max(0.0, float(raw))
