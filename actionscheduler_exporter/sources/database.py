"""What a database collector reads with, and the contract it follows.

A collector is a `Source` of the database: it gets a DatabaseContext (the round's session,
one table prefix's table names, the site's settings and the tables' statistics), runs its
queries and returns samples. Its `tier` follows from its families' (the catalog's): hot
collectors read index ranges bounded by the queue and run in every round; heavy ones
report totals over the whole table, and are refreshed in the background
(`sources.heavy_tier`) from the chunked totals of `totals.ledger`, which keeps its counts
between refreshes. Collectors keep no state: what
lives between rounds (a kept reading, the log cursor) is the round's or the log events
collector's own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.packed import in_columns
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Row, Session
from actionscheduler_exporter.db.tables import TableStats
from actionscheduler_exporter.errors import SourceError
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.sources.source import EVERY_ROUND, Freshness, Reading, Source

if TYPE_CHECKING:
    from actionscheduler_exporter.totals.ledger import Totals


@dataclass(frozen=True)
class Columns:
    """Scalar subqueries a collector's reading starts from. The round sends those of every
    collector of a table prefix that it reads (not a cached one it serves) in one
    statement (on small stores the round trip, not the server's work, is the cost: a
    thousand sites' scrape is thousands of them), and hands each collector its values;
    alone, they are one statement of their own.

    `widths`: how many values each subquery gives (empty: one each). A subquery of
    several (`values_together`) reads them in one pass over its rows, where one subquery
    per value read the same rows once per value: the server's work per store is about a
    subquery's, whatever it computes (docs/performance.md). Its values are whole numbers
    (or NULL), sent as one text and turned back into numbers here (`values`).

    `nullable`: the positions of the values that may be NULL (an age of nothing, a row
    that is gone); every other one (a count) never is, so a NULL there means the answer
    is not one (a killed statement can come back as a row of NULLs, without an error)."""

    subqueries: tuple[str, ...]
    args: tuple[object, ...] = ()
    nullable: frozenset[int] = frozenset()
    widths: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.widths and len(self.widths) != len(self.subqueries):
            raise ValueError(f"{len(self.widths)} widths for {len(self.subqueries)} subqueries")
        if any(width < 1 for width in self.widths):
            raise ValueError(f"a subquery gives at least one value: widths {self.widths}")
        if all(width == 1 for width in self.widths):
            object.__setattr__(self, "widths", ())  # one each: the answer is the values

    @property
    def width(self) -> int:
        """How many values the subqueries give."""
        return sum(self.widths) if self.widths else len(self.subqueries)

    def statement(self) -> tuple[str, tuple[object, ...]]:
        return in_columns(self.subqueries), self.args

    def values(self, answer: Row) -> Row | None:
        """The values of an answer, a column per subquery: those of a subquery of several
        values read from its text; None when that text cannot be theirs. An answer of
        another number of columns is given back as it is (`problem` names it)."""
        if not self.widths or len(answer) != len(self.widths):
            return answer
        values: list[object] = []
        for column, width in zip(answer, self.widths, strict=True):
            if width == 1:
                values.append(column)
                continue
            # A killed statement's NULL is one per value (`problem` tells).
            found = [None] * width if column is None else _whole_numbers(column, width)
            if found is None:
                return None
            values += found
        return tuple(values)

    def checked(self, row: Row) -> tuple[Row | None, str]:
        """The values of an answer's row (`values`), or None and why they cannot be this
        statement's answer."""
        values = self.values(row)
        problem = NOT_WHOLE_NUMBERS if values is None else self.problem(values)
        return (None, problem) if problem else (values, "")

    def problem(self, values: Row) -> str:
        """Why `values` cannot be this statement's answer ("" when they can)."""
        if len(values) != self.width:
            return f"{len(values)} values for {self.width} columns"
        if None not in values:  # most answers, found in C
            return ""
        nulls = [
            position + 1
            for position, value in enumerate(values)
            if value is None and position not in self.nullable
        ]
        if nulls:
            return (
                f"NULL in column(s) {nulls}, which cannot be NULL "
                "(an interrupted or killed statement)"
            )
        return ""


NOT_WHOLE_NUMBERS = "a subquery of several values gave a text of other values"
# Between the values of a subquery of several: never in a whole number's text, nor in
# the packed answer's separator (`db.packed`).
_BETWEEN = " "


def values_together(source: str, *expressions: str) -> str:
    """One subquery of several whole-number values over the rows of `source` (its FROM and
    WHERE): their texts joined by a space, NULL as nothing (`Columns.values`)."""
    texts = f", '{_BETWEEN}', ".join(f"COALESCE({expression}, '')" for expression in expressions)
    return f"SELECT CONCAT({texts}) {source}"


def _whole_numbers(column: object, width: int) -> list[int | None] | None:
    """The `width` whole numbers (or NULLs) of a subquery's text; None if it holds other.
    Matched whole in C (five such texts per store and round, the shared one once for
    each of its two collectors)."""
    if type(column) is not str:
        if not isinstance(column, bytes | bytearray):
            return None
        column = bytes(column).decode("ascii", errors="replace")
    # A decimal, a date, a sign alone: not what such a subquery gives.
    return whole_numbers_of((column,), (width,))


@functools.cache
def _numbers_of(width: int) -> re.Pattern[str]:
    """`width` whole numbers, each maybe empty (a NULL), between `_BETWEEN`s."""
    return re.compile(_BETWEEN.join(["((?:-?[0-9]+)?)"] * width), re.ASCII)


# Between the texts of several subqueries matched at once (`whole_numbers_of`): in none
# of them, so that the texts match together exactly when each matches alone.
_AMONG = ","


def whole_numbers_of(texts: tuple[str, ...], widths: tuple[int, ...]) -> list[int | None] | None:
    """The whole numbers of several subqueries' texts (of `widths` values each), in one
    match; None when any holds other, or a number too long for Python to read (an
    express read's caller then reads them one by one, which tells which)."""
    found = _texts_of(widths).fullmatch(_AMONG.join(texts))
    if found is None:
        return None
    try:
        return [int(number) if number else None for number in found.groups()]
    except ValueError:  # past Python's digits for a text's int: not a count or an age
        return None


@functools.cache
def _texts_of(widths: tuple[int, ...]) -> re.Pattern[str]:
    return re.compile(_AMONG.join(_numbers_of(width).pattern for width in widths), re.ASCII)


# Slots, not frozen: made twice per table prefix and round (a frozen one took 1.3 µs,
# `object.__setattr__` per field); never changed once made.
@dataclass(slots=True)
class DatabaseContext:
    session: Session
    tables: TableNames
    site: SiteConfig
    table_stats: Mapping[str, TableStats]
    # The whole table's counts, walked at most once per round or refresh (heavy tier).
    totals: Callable[[], Totals] | None = None
    # This round's readings of the collectors this one `needs`, by name (absent: not read,
    # or failed).
    earlier: Mapping[str, Reading] = field(default_factory=dict)
    # Values of collectors' `columns`, read by the round's combined statement, by name.
    prefetched: Mapping[str, Row] = field(default_factory=dict)
    # Why the tables' statistics could not be read this round (their collector fails).
    stats_error: QueryError | None = None

    def values_of(self, collector: Collector) -> Row:
        """The collector's columns: from the round's hot statement, or read now. A
        QueryError of kind `malformed` when the answer cannot be one."""
        found = self.prefetched.get(collector.name)
        if found is not None:
            return found  # the hot statement checked them (`Columns.problem`)
        columns = collector.columns(self)
        if columns is None:
            raise TypeError(f"collector {collector.name} declares no columns")
        values, problem = columns.checked(self.one(*columns.statement()))
        if values is None:
            message = f"the server's answer is not one: {problem}"
            raise QueryError("malformed", message, connection_lost=False)
        return values

    def action_totals(self) -> Totals:
        if self.totals is None:
            raise SourceError("query", "the totals are read by the heavy tier only")
        return self.totals()

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        return self.session.query(sql, args)

    def one(self, sql: str, args: Sequence[object] | None = None) -> Row:
        rows = self.session.query(sql, args)
        return rows[0] if rows else ()


def check_order(collectors: Sequence[Source[DatabaseContext]]) -> None:
    """Every collector runs after the ones it needs; ValueError names the one that does not."""
    seen: set[str] = set()
    for collector in collectors:
        missing = [name for name in collector.needs if name not in seen]
        if missing:
            raise ValueError(f"collector {collector.name} needs {missing} to run before it")
        seen.add(collector.name)


class Collector(Source[DatabaseContext]):
    """A group of metric families gathered by one set of queries on one table prefix."""

    # Its families' tier, set from `metrics` when the class is defined.
    tier: ClassVar[Literal["hot", "heavy"]] = "hot"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        tiers = {metric.tier for metric in getattr(cls, "metrics", ())}
        if not tiers:
            return
        if len(tiers) > 1 or not tiers <= {"hot", "heavy"}:
            raise TypeError(
                f"collector {cls.__name__} declares families of tiers {sorted(tiers)}: "
                "a collector's families are all hot or all heavy"
            )
        cls.tier = "heavy" if tiers == {"heavy"} else "hot"

    def columns(self, context: DatabaseContext) -> Columns | None:
        """The scalar subqueries its reading starts from, if it has such (see `Columns`):
        `read` then takes their values from `context.values_of(self)`."""
        return None

    def same_samples_for(self, values: Row) -> bool:
        """Whether `read` makes its samples of these `values` of its columns alone: not of
        the clock, nor of another statement. A collector that says so, reports no
        duration and needs no other's reading is read straight from its values in every
        round, without the frame of a `Reading` (`rounds.collectors_loop`). By default
        no."""
        return False

    def freshness(self, site: SiteConfig) -> Freshness:
        """Heavy collectors refresh every `heavy_interval` (0: in every round, as hot ones)."""
        return Freshness(site.heavy_interval) if self.tier == "heavy" else EVERY_ROUND

    def renewed(
        self, kept: Sequence[Sample], context: DatabaseContext
    ) -> tuple[Sample, ...] | None:
        """For a collector cached between rounds (`Freshness.cached`) whose interval has
        passed: its `kept` samples brought up to date without a statement, when the
        round's hot statement tells that what it reads has not changed; None (the
        default): read it again."""
        return None

    def retain(self, prefixes: Collection[str]) -> None:
        """Forgets what it keeps of table prefixes not in `prefixes` (a network's subsites
        that are gone); most keep nothing."""
