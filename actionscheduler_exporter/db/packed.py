"""A statement of scalar subqueries answered in one column instead of one per subquery.

PyMySQL parses a description packet in Python for every column of every answer, before
the row: in a thousand stores' scrape, the hot statement's descriptions were an eighth of
the exporter's Python (docs/performance.md). The server types a subquery when it prepares
the statement, not per row, so the types an answer in columns shows (`learn`) hold for
every later answer of the same statement; from then on it is sent packed: each value as
text behind a marker (NULL as nothing), joined by commas, and each turned back into the
value the driver would have made of it, by the driver's own converter for its type.

Only numbers and dates are packed: their text never holds the separator, and is ASCII.
A statement with any other column (a text of table statistics) stays in columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pymysql.constants import FIELD_TYPE
from pymysql.converters import decoders

from actionscheduler_exporter.db.session import Row

_PACKABLE = frozenset(
    {
        FIELD_TYPE.TINY,
        FIELD_TYPE.SHORT,
        FIELD_TYPE.LONG,
        FIELD_TYPE.INT24,
        FIELD_TYPE.LONGLONG,
        FIELD_TYPE.DECIMAL,
        FIELD_TYPE.NEWDECIMAL,
        FIELD_TYPE.FLOAT,
        FIELD_TYPE.DOUBLE,
        FIELD_TYPE.DATE,
        FIELD_TYPE.DATETIME,
        FIELD_TYPE.TIMESTAMP,
    }
)
_SEPARATOR = ","
_VALUE = "="  # before each value, so that an empty part is a NULL

Converter = Callable[[str], Any]


def in_columns(subqueries: Sequence[str]) -> str:
    """The subqueries as one statement, a column each. Short column names: the server
    names an unnamed column by its whole expression, sent back and parsed with every
    answer (a tenth of a thousand sites' scrape)."""
    return "SELECT " + ", ".join(f"({query}) AS c{n}" for n, query in enumerate(subqueries))


def _as_is(text: str) -> Any:
    return text


class PackedStatement:
    """One statement of scalar subqueries: its SQL in columns, and once an answer in
    columns showed the subqueries' types (`learn`), its SQL in one column (`packed`)."""

    __slots__ = ("_converters", "_packed_sql", "args", "packed", "sql")

    def __init__(self, subqueries: Sequence[str], args: tuple[object, ...]) -> None:
        self.sql = in_columns(subqueries)
        self.args = args
        parts = ", ".join(f"COALESCE(CONCAT('{_VALUE}', ({query})), '')" for query in subqueries)
        self._converters: tuple[Converter, ...] | None = None
        # None until the types are known, or when they cannot be packed.
        self.packed: str | None = None
        self._packed_sql = f"SELECT CONCAT_WS('{_SEPARATOR}', {parts}) AS p"

    def learn(self, type_codes: Sequence[int]) -> None:
        """The types of an answer in columns: from now on the statement is sent packed
        when every one of them can be."""
        if type_codes and all(code in _PACKABLE for code in type_codes):
            self._converters = tuple(decoders.get(code, _as_is) for code in type_codes)
            self.packed = self._packed_sql

    def forget(self) -> None:
        """A packed answer that could not be read: the statement goes back to columns."""
        self._converters = None
        self.packed = None

    def unpack(self, rows: list[Row]) -> Row | None:
        """The values of a packed answer, as the driver would have made them in columns;
        None when the answer cannot be one (not one row of one text)."""
        converters = self._converters
        if converters is None or len(rows) != 1 or len(rows[0]) != 1:
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
        try:
            for part, convert in zip(parts, converters, strict=True):
                if not part:
                    values.append(None)
                elif part[0] == _VALUE:
                    values.append(convert(part[1:]))
                else:
                    return None
        except (ValueError, ArithmeticError):
            return None
        return tuple(values)
