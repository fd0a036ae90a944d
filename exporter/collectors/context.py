"""What a database collector reads with, and the contract it follows.

A collector is a `Source` of the database: it gets a DatabaseContext (the round's session,
one table prefix's table names, the site's settings and the tables' statistics), runs its
queries and returns samples. Its `tier` says what its queries cost: hot collectors read
index ranges bounded by the queue and run in every round; heavy ones report totals over the
whole table, and are refreshed in the background (`rounds.heavy_tier`) from the chunked totals of
`totals.ledger`, which keeps its counts between refreshes. Collectors keep no state, but for
the due split's last reading per site when `due_split_interval` spaces its refreshes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from exporter.config.model import SiteConfig
from exporter.db.session import Row, Session
from exporter.db.tables import TableNames, TableStats
from exporter.sources.source import EVERY_ROUND, Freshness, Source, SourceError

if TYPE_CHECKING:
    from exporter.totals.ledger import Totals

# Dates before this are Action Scheduler's zero date or other junk that would turn into
# ages of centuries; Action Scheduler did not exist before it.
VALID_DATE_FLOOR = "2000-01-01 00:00:00"


@dataclass(frozen=True)
class DatabaseContext:
    session: Session
    tables: TableNames
    site: SiteConfig
    table_stats: Mapping[str, TableStats]
    # The whole table's counts, walked at most once per round or refresh (heavy tier).
    totals: Callable[[], Totals] | None = None
    # What a collector found that a later one of the same round may use instead of asking
    # again (the due collector's total for the split); collectors of a round run in order.
    found: dict[str, float] = field(default_factory=dict)

    def action_totals(self) -> Totals:
        if self.totals is None:
            raise SourceError("query", "the totals are read by the heavy tier only")
        return self.totals()

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        return self.session.query(sql, args)

    def one(self, sql: str, args: Sequence[object] | None = None) -> Row:
        rows = self.session.query(sql, args)
        return rows[0] if rows else ()


class Collector(Source[DatabaseContext]):
    """A group of metric families gathered by one set of queries on one table prefix."""

    tier: ClassVar[Literal["hot", "heavy"]] = "hot"

    def freshness(self, site: SiteConfig) -> Freshness:
        """Heavy collectors refresh every `heavy_interval` (0: in every round, as hot ones)."""
        return Freshness(site.heavy_interval) if self.tier == "heavy" else EVERY_ROUND


# Label texts shared by every site that has them: a thousand sites' hooks and groups are
# mostly the same few names, held between scrapes by the background sources. Bounded, and
# not sys.intern: on Python 3.12 interned strings are never freed, and hook names are data.
_SHARED_TEXTS: dict[str, str] = {}
MAX_SHARED_TEXTS = 20_000


def label_value(raw: Any) -> str:
    """Text for a label from whatever the database returned (bytes included)."""
    if raw is None:
        return ""
    if isinstance(raw, bytes | bytearray):
        text = bytes(raw).decode("utf-8", errors="replace")
    else:
        # Lone surrogates cannot be written as UTF-8: replace them rather than fail.
        text = str(raw).encode("utf-8", errors="replace").decode("utf-8")
    shared = _SHARED_TEXTS.get(text)
    if shared is not None:
        return shared
    if len(_SHARED_TEXTS) < MAX_SHARED_TEXTS:
        _SHARED_TEXTS[text] = text
    return text


def seconds(raw: Any) -> float:
    """An age column that may be NULL (no rows) or negative (a date in the future)."""
    if raw is None:
        return 0.0
    return max(0.0, float(raw))
