"""A hot statement made of its collectors' parts (`Columns`), and its answer split back
into each part's values.

The statement is made once per set of parts (`made_of`): a subquery that several parts
declare (the same text with the same arguments: `collectors.claimed`) is sent once, and
each part is told where its values are in the answer (`places`). A normal read splits
each answer part by part (`split`), each text of several values read on its own; an
express read's plan (`StatementPlan`) reads a row's texts in one match and takes each
part's values from the row so expanded, with the same outcome (the plan's unit test
holds the two to each other).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from actionscheduler_exporter.db.packed import PLACEHOLDER, PackedStatement
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.db.tables import TableStats, parse_table_stats
from actionscheduler_exporter.sources.database import Columns, whole_numbers_of

# Statistics known, and not in the answer: kept apart (`split`).
NO_STATS: Mapping[str, TableStats] = {}


@dataclass(frozen=True, slots=True)
class StatementPlan:
    """A store's hot statement as it was read through the server's read-ahead, with its
    statistics known: the statement, each collector's columns, and where their values
    are in its answer; what an express read takes the next answer with
    (`rounds.hot_statement.ExpressPlans`)."""

    statement: PackedStatement
    parts: tuple[tuple[str, Columns], ...]
    places: tuple[Places, ...]
    # The answer's texts of several values read in one match (`_Expansion`), made once;
    # None where the parts do not agree on a subquery's values (each reads its own).
    expansion: _Expansion | None = field(init=False)

    def __post_init__(self) -> None:
        expansion = _Expansion.of(self.statement.width, self.parts, self.places)
        object.__setattr__(self, "expansion", expansion)

    def values(self, row: Row, tables: TableNames) -> dict[str, Row] | None:
        """Each collector's values in an answer to the statement; None when any part of
        it cannot be one (as `read_hot_statement` would not use it)."""
        expansion = self.expansion
        if expansion is not None and len(row) == self.statement.width:
            expanded = expansion.expanded(row)
            if expanded is not None:
                prefetched: dict[str, Row] = {}
                for (name, columns), place in zip(self.parts, expansion.places, strict=True):
                    part = expanded[place] if type(place) is slice else place(expanded)
                    if None in part and columns.problem(part):  # a NULL where none may be
                        return None
                    prefetched[name] = part
                return prefetched
        # A row of another width, a NULL or bytes where a text was, a text of other values
        # (or parts that disagree on a subquery's values): read part by part, as a normal
        # read does, which tells.
        answer = split([row], self.statement.width, self.parts, self.places, tables, NO_STATS)
        return None if answer is None else answer[1]


@dataclass(frozen=True, slots=True)
class _Expansion:
    """An answer's row with each text of several values (`Columns.widths`) replaced by
    its values, read in one match for the whole row (`whole_numbers_of`), and where
    each part's values are in it: an express read's splitting of a row, where each
    part read its own texts (five per store and round)."""

    texts: Callable[[Row], tuple[object, ...]] | None  # the row's texts; None: it has none
    widths: tuple[int, ...]  # their values each
    kinds: tuple[type, ...]  # `str` for each: what the driver makes of a text
    expand: Callable[[Row], Row]  # the row, then the texts' values: the expanded row
    places: tuple[Places, ...]  # each part's values in the expanded row

    @staticmethod
    def of(
        width: int, parts: Sequence[tuple[str, Columns]], places: Sequence[Places]
    ) -> _Expansion | None:
        """None when two parts declare one subquery with other numbers of values (the
        statement sends it once: `_statement_of`), each part then reading its own."""
        values_of: list[int | None] = [None] * width  # each column's values
        for (_, part), place in zip(parts, places, strict=True):
            at = columns_at(place, width)
            for column, values in zip(at, part.widths or (1,) * len(at), strict=True):
                if values_of[column] not in (None, values):
                    return None
                values_of[column] = values
        if None in values_of:  # a column of no part: not a statement made of these parts
            return None
        return _Expansion._made(width, cast(list[int], values_of), places)

    @staticmethod
    def _made(width: int, values_of: list[int], places: Sequence[Places]) -> _Expansion:
        columns = range(width)
        texts = [column for column in columns if values_of[column] > 1]
        # Where each column's values are in the expanded row (`expanded_at`), and where
        # each value of it is in the row followed by the texts' values (`order`).
        expanded_at: list[range] = []
        order: list[int] = []
        after = width
        for column in columns:
            values = values_of[column]
            expanded_at.append(range(len(order), len(order) + values))
            if values == 1:
                order.append(column)
            else:
                order += range(after, after + values)
                after += values
        part_places: list[Places] = []
        for place in places:
            at = columns_at(place, width)
            part_places.append(_places([p for column in at for p in expanded_at[column]]))
        return _Expansion(
            _getter(texts) if texts else None,
            tuple(values_of[column] for column in texts),
            (str,) * len(texts),
            _getter(order),
            tuple(part_places),
        )

    def expanded(self, row: Row) -> Row | None:
        """The row with its texts' values in their places; None when a text is not one
        of whole numbers (or not a text)."""
        if self.texts is None:
            return row
        texts = self.texts(row)
        if tuple(map(type, texts)) != self.kinds:  # a NULL, bytes: read one by one
            return None
        numbers = whole_numbers_of(cast(tuple[str, ...], texts), self.widths)
        if numbers is None:
            return None
        return self.expand((*row, *numbers))


def statement_of(parts: Sequence[Columns]) -> PackedStatement:
    """The one statement of the parts' subqueries, in order, one that several parts
    declare sent once: the same object for the same parts (`_statement_of`)."""
    return made_of(parts)[0]


def made_of(parts: Sequence[Columns]) -> Made:
    """The statement of the parts, and where each part's values are in its answer."""
    return _statement_of(tuple(map(_TEXT_AND_ARGS, parts)))


# A part's subqueries, arguments and widths: what its statement is made of, and a key
# hashed in C (a `Columns`' own hash is a Python call, five per store and round).
_TEXT_AND_ARGS = operator.attrgetter("subqueries", "args", "widths")
_Part = tuple[tuple[str, ...], tuple[object, ...], tuple[int, ...]]
# Where a part's values are in the statement's row: a slice where they are side by side,
# else their places (a subquery another part declared first).
Places = slice | Callable[[Sequence[object]], tuple[object, ...]]
Made = tuple[PackedStatement, tuple[Places, ...]]


@functools.lru_cache(maxsize=4096)
def _statement_of(parts: tuple[_Part, ...]) -> Made:
    """The statement of all the parts' subqueries (each part's subqueries, arguments and
    values per subquery), a subquery that several parts declare (the same text with the
    same arguments: `collectors.claimed`) sent once; and where each part's subqueries are
    in it. Made once per set of parts (the same in most rounds of a prefix, and for every
    database with the same table prefix), so that it is packed once its types are
    known."""
    queries: list[str] = []
    args: list[object] = []
    texts: set[int] = set()
    found: dict[tuple[str, tuple[object, ...]], int] = {}
    places: list[Places] = []
    for subqueries, part_args, widths in parts:
        own = _args_per_subquery(subqueries, part_args)
        at: list[int] = []
        for index, query in enumerate(subqueries):
            key = None if own is None else (query, own[index])
            place = None if key is None else found.get(key)
            if place is None:
                place = len(queries)
                queries.append(query)
                if widths and widths[index] > 1:
                    texts.add(place)
                if key is not None:
                    found[key] = place
                    args += key[1]
            at.append(place)
        if own is None:  # arguments not known per subquery: the part's, after its own
            args += part_args
        places.append(_places(at))
    return PackedStatement(tuple(queries), tuple(args), frozenset(texts)), tuple(places)


def _args_per_subquery(
    subqueries: tuple[str, ...], args: tuple[object, ...]
) -> list[tuple[object, ...]] | None:
    """Each subquery's arguments (its placeholders', in order); None when the
    placeholders do not take the arguments exactly (the part is then sent as it is,
    none of its subqueries shared)."""
    found: list[tuple[object, ...]] = []
    start = 0
    for query in subqueries:
        count = PLACEHOLDER.findall(query).count("%s")
        found.append(args[start : start + count])
        start += count
    return found if start == len(args) else None


def columns_at(place: Places, width: int) -> tuple[int, ...]:
    """The columns that `place` takes of a row of `width`."""
    columns = tuple(range(width))
    return cast(tuple[int, ...], columns[place] if type(place) is slice else place(columns))


def _getter(places: list[int]) -> Callable[[Row], tuple[object, ...]]:
    """The values at `places` of a row, as a tuple (in C for two or more)."""
    if len(places) > 1:
        return operator.itemgetter(*places)
    place = places[0]
    return lambda row: (row[place],)


def _places(at: list[int]) -> Places:
    """A slice for places side by side (taken in C), else a getter of each place."""
    first = at[0] if at else 0
    if at == list(range(first, first + len(at))):
        return slice(first, first + len(at))
    return operator.itemgetter(*at)


def split(
    rows: list[Row],
    width: int,
    parts: Sequence[tuple[str, Columns]],
    places: tuple[Places, ...],
    tables: TableNames,
    known_stats: Mapping[str, TableStats] | None,
) -> tuple[Mapping[str, TableStats], dict[str, Row]] | None:
    """The statement's one row (of `width` columns: the statistics' when they are not
    known, then the parts', each where `places` says) as statistics and each collector's
    values; None when any part of it cannot be an answer (then none of it is trusted)."""
    values = rows[0]
    if len(values) != width:
        return None
    stats = known_stats
    if stats is None:
        try:
            stats = parse_table_stats(tables, values[0])
        except QueryError:
            return None
        places = places[1:]
    prefetched: dict[str, Row] = {}
    for (name, columns), place in zip(parts, places, strict=True):
        part = values[place] if type(place) is slice else place(values)
        if columns.widths:  # a subquery of several values: read from its text
            read = columns.values(part)
            if read is None:
                return None
            part = read
        if None in part and columns.problem(part):  # a NULL where none may be
            return None
        prefetched[name] = part
    return stats, prefetched
