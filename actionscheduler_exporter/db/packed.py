"""A statement of scalar subqueries answered in one column instead of one per subquery.

PyMySQL parses a description packet in Python for every column of every answer, before
the row: in a thousand stores' scrape, the hot statement's descriptions were an eighth of
the exporter's Python (docs/performance.md; since 2026-12-06 `db.lean_rows` takes a set
of descriptions seen before as it was parsed, but a store's own statement still costs a
packet per column, read and compared). A server types a subquery when it prepares
the statement, not per row, so the types an answer in columns shows (`learn`) hold for
later answers of the same statement from the same database; from then on it is sent
packed there: each value as text behind a marker (NULL as nothing), joined by commas, and
each turned back into the value the driver would have made of it, by the driver's own
converter for its type.

Only whole numbers, decimals, doubles and dates are packed: their text never holds the
separator, and is ASCII; and the texts of the subqueries that give several whole numbers
(`texts`: `sources.database.values_together`), which are digits, signs and spaces. A
statement with any other column (a text of table statistics) stays in columns; so does
one whose packed answer could not be read once (a server mode that makes `CONCAT` of NULL
not NULL, as MariaDB's Oracle mode does).

Several stores read in one statement (`db.read_ahead`) are read in columns, not packed:
the descriptions are then the batch's, not each store's, and packed branches cost the
server 40 to 70 ms more CPU per scrape of a thousand stores, about a tenth
(docs/performance.md). Their branches are joined only where the types learnt match
(`shape`), and a batch's answer is used only where the union's own types are those.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from pymysql.constants import FIELD_TYPE
from pymysql.converters import decoders

from actionscheduler_exporter.db.session import Row

# FLOAT is left out: MySQL may write a FLOAT's text with more digits in CONCAT than in a
# column of its own. No hot subquery returns one.
_PACKABLE = frozenset(
    {
        FIELD_TYPE.TINY,
        FIELD_TYPE.SHORT,
        FIELD_TYPE.LONG,
        FIELD_TYPE.INT24,
        FIELD_TYPE.LONGLONG,
        FIELD_TYPE.DECIMAL,
        FIELD_TYPE.NEWDECIMAL,
        FIELD_TYPE.DOUBLE,
        FIELD_TYPE.DATE,
        FIELD_TYPE.DATETIME,
        FIELD_TYPE.TIMESTAMP,
    }
)
# The types a subquery of several whole numbers comes back as (a text).
_TEXTS = frozenset({FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING})
_SEPARATOR = ","
_VALUE = "="  # before each value, so that an empty part is a NULL

Converter = Callable[[str], Any]
# Where the types were learnt: the server (host, port, socket) and the database.
Endpoint = tuple[str, int, str, str]
# Per endpoint: the converters of its answer's columns, or None: not packed there.
_Learnt = tuple[Converter, ...] | None
# The types of an answer's columns (pymysql's FIELD_TYPE codes).
Shape = tuple[int, ...]
# A placeholder, or a per cent sign written twice (a literal one), in a statement's text.
PLACEHOLDER = re.compile(r"%.")
# An argument written into a branch's text rather than escaped by the driver for every
# store of every batch (three per store: 4 % of a thousand stores' calls): a text of
# digits, spaces, colons, dots and hyphens (a date's), which needs no escaping and is
# written the same in every SQL mode and character set.
_PLAIN_TEXT = re.compile(r"[0-9 :.-]*")


def in_columns(subqueries: Sequence[str]) -> str:
    """The subqueries as one statement, a column each. Short column names: the server
    names an unnamed column by its whole expression, sent back and parsed with every
    answer (a tenth of a thousand sites' scrape)."""
    return "SELECT " + ", ".join(f"({query}) AS c{n}" for n, query in enumerate(subqueries))


def _as_is(text: str) -> Any:
    return text


class PackedStatement:
    """One statement of scalar subqueries, shared by every database it is sent to: its
    SQL in columns, and once an answer in columns from an endpoint showed the subqueries'
    types (`learn`), its SQL in one column for that endpoint (`packed`). `texts`: the
    places of the subqueries that give several whole numbers as one text, packed too."""

    __slots__ = (
        "_branch",
        "_learnt",
        "_packed_sql",
        "_shapes",
        "_subqueries",
        "_texts",
        "args",
        "width",
    )

    def __init__(
        self,
        subqueries: Sequence[str],
        args: tuple[object, ...],
        texts: frozenset[int] = frozenset(),
    ) -> None:
        self._subqueries = tuple(subqueries)
        self._texts = texts
        self.args = args
        self.width = len(self._subqueries)  # the values of its answer
        # Made when first learnt: a statement with the tables' statistics is never
        # packed, and a network keeps a statement per subsite.
        self._packed_sql = ""
        self._learnt: dict[Endpoint, _Learnt] = {}
        self._shapes: dict[Endpoint, Shape] = {}
        # A branch's columns and the arguments not written in them, made when the first
        # one is (one attribute: another lane's round may read it as it is set).
        self._branch: tuple[str, tuple[object, ...]] | None = None

    @property
    def subqueries(self) -> tuple[str, ...]:
        return self._subqueries

    @property
    def sql(self) -> str:
        """In columns (made each time: sent once per endpoint, or when not packed)."""
        return in_columns(self._subqueries)

    def packed(self, endpoint: Endpoint) -> str | None:
        """The SQL in one column, once the endpoint's types are known and can be packed."""
        return self._packed_sql if self._learnt.get(endpoint) else None

    def branch(self, place: int) -> tuple[str, tuple[object, ...]]:
        """The SQL in columns as one branch of a `UNION ALL` of several stores' statements,
        tagged with its `place` (`db.read_ahead`), with its arguments: those that are
        dates or whole numbers written in its text, once."""
        branch = self._branch
        if branch is None:
            columns = in_columns(self._subqueries).removeprefix("SELECT ")
            branch = self._branch = _written_in(columns, self.args)
        return f"SELECT {place}, {branch[0]}", branch[1]

    def shape(self, endpoint: Endpoint) -> Shape | None:
        """The types of its answer's columns at the endpoint, once packed there: branches
        of one `UNION ALL` have the same (None: not packed, not read with others)."""
        return self._shapes.get(endpoint) if self._learnt.get(endpoint) else None

    def learn(self, endpoint: Endpoint, type_codes: Sequence[int]) -> None:
        """The types of an answer in columns from the endpoint: from now on the statement
        is sent to it packed when every one of them can be."""
        if endpoint in self._learnt:
            return  # packed already, or never
        if not (type_codes and all(map(self._packable, range(len(type_codes)), type_codes))):
            self._learnt[endpoint] = None
            return
        if not self._packed_sql:
            parts = ", ".join(
                f"COALESCE(CONCAT('{_VALUE}', ({query})), '')" for query in self._subqueries
            )
            # Whole before it is seen: another database's round may learn it meanwhile.
            self._packed_sql = f"SELECT CONCAT_WS('{_SEPARATOR}', {parts}) AS p"
        self._learnt[endpoint] = tuple(decoders.get(code, _as_is) for code in type_codes)
        self._shapes[endpoint] = tuple(type_codes)

    def _packable(self, place: int, code: int) -> bool:
        return code in _PACKABLE or (place in self._texts and code in _TEXTS)

    def unpack(self, endpoint: Endpoint, rows: list[Row]) -> Row | None:
        """The values of a packed answer, as the driver would have made them in columns;
        None when the answer cannot be one (then the statement is no longer packed for
        the endpoint)."""
        values = self._values(self._learnt.get(endpoint), rows)
        if values is None:
            self._learnt[endpoint] = None
        return values

    @staticmethod
    def _values(converters: _Learnt, rows: list[Row]) -> Row | None:
        if not converters or len(rows) != 1 or len(rows[0]) != 1:
            return None
        text = rows[0][0]
        if isinstance(text, bytes | bytearray):
            try:
                text = bytes(text).decode("ascii")
            except UnicodeDecodeError:
                return None
        if not isinstance(text, str):
            return None
        parts = text.split(_SEPARATOR)
        if len(parts) != len(converters):
            return None
        values: list[Any] = []
        for part, convert in zip(parts, converters, strict=True):
            if not part:
                values.append(None)
                continue
            if part[0] != _VALUE or len(part) == 1:  # "=": a NULL that CONCAT kept
                return None
            try:
                values.append(convert(part[1:]))
            except Exception:  # a converter's error of any kind: not an answer
                return None
        return tuple(values)


def _written_in(sql: str, args: tuple[object, ...]) -> tuple[str, tuple[object, ...]]:
    """The text with each argument that is a whole number or a date's text written in
    place of its placeholder, as the driver writes it, and the arguments left; as it is
    when its placeholders do not take the arguments exactly."""
    if PLACEHOLDER.findall(sql).count("%s") != len(args):
        return sql, args
    given = iter(args)
    left: list[object] = []

    def written(placeholder: re.Match[str]) -> str:
        if placeholder.group() != "%s":
            return placeholder.group()  # a literal per cent sign, still to be formatted
        arg = next(given)
        if type(arg) is int:
            return str(arg)
        if type(arg) is str and _PLAIN_TEXT.fullmatch(arg):
            return f"'{arg}'"
        left.append(arg)
        return "%s"

    return PLACEHOLDER.sub(written, sql), tuple(left)
