"""`db.lean_rows.read_row` makes of a row packet, with the columns' `lean_converters`,
what PyMySQL's own parsing makes of it with theirs:
the same values (NULLs, one-, two-, three- and eight-byte lengths, decoded and converted
or left as bytes), a row ended early where its packet ends, and a packet whose value is
longer than itself refused by both."""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pymysql.err
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymysql.connections import MySQLResult
from pymysql.converters import convert_datetime
from pymysql.protocol import MysqlPacket

from actionscheduler_exporter.db.lean_rows import (
    _DEFAULT_DECODERS,
    LeanResult,
    lean_converters,
    read_row,
)

Column = tuple[str | None, Callable[[Any], Any] | None]


def pymysql_row(data: bytes, converters: list[Column]) -> tuple[Any, ...]:
    """What PyMySQL's result makes of the packet (its own method, on a bare result)."""
    result = MySQLResult.__new__(MySQLResult)
    result.converters = converters  # type: ignore[attr-defined]
    result.unbuffered_active = False
    row: tuple[Any, ...] = result._read_row_from_packet(MysqlPacket(data, "utf8mb4"))  # type: ignore[attr-defined]
    return row


def length_prefix(length: int) -> bytes:
    if length < 251:
        return bytes([length])
    if length < 1 << 16:
        return b"\xfc" + length.to_bytes(2, "little")
    if length < 1 << 24:
        return b"\xfd" + length.to_bytes(3, "little")
    return b"\xfe" + length.to_bytes(8, "little")


def packet(values: list[bytes | None]) -> bytes:
    return b"".join(b"\xfb" if value is None else length_prefix(len(value)) + value
                    for value in values)  # fmt: skip


# A column as the driver describes it, and values of it as a server writes them (short:
# the lengths of every width are `test_every_width_of_a_length_is_read`'s).
_DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, places=4)
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
_COLUMNS: list[tuple[Column, st.SearchStrategy[bytes]]] = [
    (("ascii", int), st.integers(-(2**63), 2**64 - 1).map(lambda n: str(n).encode())),
    (("ascii", Decimal), _DECIMALS.map(lambda d: str(d).encode())),
    (("ascii", float), _FLOATS.map(lambda f: repr(f).encode())),
    (("ascii", convert_datetime), st.datetimes().map(lambda d: d.isoformat(" ").encode())),
    (("ascii", convert_datetime), st.just(b"0000-00-00 00:00:00")),
    (("utf8", None), st.text(max_size=40).map(lambda t: t.encode())),
    ((None, None), st.binary(max_size=40)),
]


@st.composite
def rows(draw: st.DrawFn) -> tuple[list[Column], list[bytes | None]]:
    chosen = draw(st.lists(st.sampled_from(_COLUMNS), min_size=1, max_size=16))
    values = [draw(st.none() | strategy) for _, strategy in chosen]
    return [column for column, _ in chosen], values


# Generation is what takes time on a loaded machine, not the test: no health check on it.
_LOADED = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@_LOADED
@given(rows())
def test_a_row_is_read_as_pymysql_reads_it(row: tuple[list[Column], list[bytes | None]]) -> None:
    converters, values = row
    data = packet(values)
    assert read_row(data, lean_converters(converters)) == pymysql_row(data, converters)


@_LOADED
@given(rows(), st.integers(0, 16))
def test_a_row_that_ends_early_ends_where_pymysql_ends_it(
    row: tuple[list[Column], list[bytes | None]], kept: int
) -> None:
    converters, values = row
    data = packet(values[:kept])
    assert read_row(data, lean_converters(converters)) == pymysql_row(data, converters)


@pytest.mark.parametrize("length", [250, 251, 65_535, 65_536, 1 << 24])
def test_every_width_of_a_length_is_read(length: int) -> None:
    value = b"x" * length
    converters: list[Column] = [(None, None), ("ascii", int)]
    data = packet([value, b"42"])
    assert (
        read_row(data, lean_converters(converters)) == pymysql_row(data, converters) == (value, 42)
    )


def test_a_length_byte_of_0xff_is_a_null_to_both() -> None:
    converters: list[Column] = [("ascii", int), ("ascii", int)]
    data = b"\xff" + packet([b"5"])
    assert read_row(data, lean_converters(converters)) == pymysql_row(data, converters) == (None, 5)


def test_a_value_longer_than_its_packet_is_refused() -> None:
    converters: list[Column] = [("ascii", int)]
    data = b"\x05" + b"12"
    with pytest.raises(AssertionError):
        pymysql_row(data, converters)
    with pytest.raises(pymysql.err.InternalError, match="longer than its packet"):
        read_row(data, lean_converters(converters))


@pytest.mark.parametrize("text", [b"12a", b"1\xff", b""])
@pytest.mark.parametrize("convert", [int, float])
def test_a_number_that_is_not_one_fails_in_both(text: bytes, convert: Callable[[Any], Any]) -> None:
    """Read from its bytes without the ASCII decoding, a number fails as PyMySQL's does
    (a UnicodeDecodeError is a ValueError)."""
    converters: list[Column] = [("ascii", convert)]
    data = packet([text])
    not_a_number = "invalid literal|could not convert|codec can't decode"
    with pytest.raises(ValueError, match=not_a_number):
        pymysql_row(data, converters)
    with pytest.raises(ValueError, match=not_a_number):
        read_row(data, lean_converters(converters))


@pytest.mark.parametrize("prefix", [b"\xfc\x05", b"\xfd\x05\x00", b"\xfe\x05\x00\x00"])
def test_a_length_cut_short_is_refused(prefix: bytes) -> None:
    """PyMySQL fails on it with struct's error; here it is the driver's InternalError,
    which drops the connection, as a value longer than its packet does."""
    converters: list[Column] = [(None, None)]
    with pytest.raises(struct.error):
        pymysql_row(prefix, converters)
    with pytest.raises(pymysql.err.InternalError, match="cut short"):
        read_row(prefix, lean_converters(converters))


class _Packets:
    """What a result reads its packets from: given ones, in order."""

    def __init__(self, packets: list[bytes]) -> None:
        self.use_unicode, self.encoding = True, "utf8"
        self.decoders = dict(_DEFAULT_DECODERS)
        self._packets = iter(packets)

    def _read_packet(self, packet_type: type[MysqlPacket] = MysqlPacket) -> MysqlPacket:
        return packet_type(next(self._packets), self.encoding)


def test_descriptions_without_an_eof_after_them_are_refused() -> None:
    """A driver that stopped asking for the EOF packet would hand a row where it comes:
    refused, never parsed as one."""
    description = (
        b"\x03def\x00\x00\x00\x01a\x00\x0c\x3f\x00\x01\x00\x00\x00\x08\x81\x00\x00\x00\x00"
    )
    result = LeanResult.__new__(LeanResult)
    result.unbuffered_active = False
    result.field_count = 1
    result.connection = _Packets([description, packet([b"7"])])
    with pytest.raises(pymysql.err.InternalError, match="no EOF packet"):
        result._get_descriptions()
    result.connection = _Packets([description, b"\xfe\x00\x00\x02\x00"])
    result._get_descriptions()
    assert [column[0] for column in result.description] == ["a"]
