"""`db.lean_rows.read_row` makes of a row packet, with the columns' `lean_converters`,
what PyMySQL's own parsing makes of it with theirs:
the same values (NULLs, one-, two-, three- and eight-byte lengths, decoded and converted
or left as bytes), a row ended early where its packet ends, and a packet whose value is
longer than itself refused by both. `read_payload` reads the packets of a stream of
bytes as PyMySQL's `_read_packet` does (a packet in two parts joined, one out of
sequence or an error packet raising the same), and a `LeanResult` reads rows up to the
EOF packet, with its warnings and whether more results follow, as PyMySQL's result."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pymysql.err
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymysql.connections import MAX_PACKET_LEN, Connection, MySQLResult
from pymysql.constants.SERVER_STATUS import SERVER_MORE_RESULTS_EXISTS
from pymysql.converters import convert_datetime
from pymysql.protocol import MysqlPacket

from actionscheduler_exporter.db.lean_rows import (
    _DEFAULT_DECODERS,
    LeanResult,
    lean_converters,
    read_payload,
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


def stream(payloads: list[bytes], first: int = 0) -> Connection:
    """A PyMySQL connection, not connected, whose socket holds the payloads as a server
    sends them: each with its length and sequence number (from `first`), one of
    `MAX_PACKET_LEN` bytes or more in parts."""
    framed = bytearray()
    number = first
    for payload in payloads:
        parts = [payload[at : at + MAX_PACKET_LEN] for at in range(0, len(payload), MAX_PACKET_LEN)]
        if len(payload) % MAX_PACKET_LEN == 0:
            parts.append(b"")  # a last part shorter than the most: the end
        for part in parts:
            framed += len(part).to_bytes(3, "little") + bytes([number % 256]) + part
            number += 1
    connection = Connection.__new__(Connection)
    connection._rfile = io.BytesIO(bytes(framed))  # type: ignore[attr-defined]
    connection._sock = None  # type: ignore[attr-defined]
    connection._next_seq_id = 0  # type: ignore[attr-defined]
    connection._current_timeout = connection._read_timeout = None  # type: ignore[attr-defined]
    connection._result = None  # type: ignore[attr-defined]
    connection.use_unicode, connection.encoding = True, "utf8"
    connection.decoders = dict(_DEFAULT_DECODERS)
    return connection


def test_packets_are_read_as_pymysql_reads_them() -> None:
    payloads = [b"\x01", packet([b"7", None]), b"x" * MAX_PACKET_LEN, b"y" * (MAX_PACKET_LEN + 5)]
    lean, plain = stream(payloads), stream(payloads)
    for payload in payloads:
        assert read_payload(lean) == plain._read_packet().get_all_data() == payload  # type: ignore[no-untyped-call]
    assert lean._next_seq_id == plain._next_seq_id == 6  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("first", "error", "message"),
    [(3, pymysql.err.InternalError, "got 3 expected 0"), (0, None, None)],
)
def test_a_packet_out_of_sequence_closes_the_connection_in_both(
    first: int, error: type[Exception] | None, message: str | None
) -> None:
    for read in (read_payload, lambda connection: connection._read_packet()):
        connection = stream([b"\x01"], first=first)
        connection._next_seq_id = 0 if first else 1  # type: ignore[attr-defined]
        expected = error or pymysql.err.OperationalError  # MariaDB's at a shutdown: seq 0
        with pytest.raises(expected, match=message or "Lost connection"):
            read(connection)
        assert connection._rfile is None  # type: ignore[attr-defined]


def test_an_error_packet_raises_the_servers_error_in_both() -> None:
    error = b"\xff" + (1146).to_bytes(2, "little") + b"#42S02Table 'x.y' doesn't exist"
    for read in (read_payload, lambda connection: connection._read_packet()):
        connection = stream([error])
        result = MySQLResult.__new__(MySQLResult)
        result.unbuffered_active = True
        connection._result = result  # type: ignore[attr-defined]
        with pytest.raises(pymysql.err.ProgrammingError, match="doesn't exist") as raised:
            read(connection)
        assert raised.value.args[0] == 1146
        assert result.unbuffered_active is False


def _result_of(kind: Any, connection: Connection, converters: list[Column]) -> Any:
    result = kind.__new__(kind)
    result.connection, result.unbuffered_active = connection, False
    result.converters, result._lean = converters, lean_converters(converters)
    result.warning_count, result.has_next = 0, None
    return result


@pytest.mark.parametrize("status", [0x0002, 0x0002 | SERVER_MORE_RESULTS_EXISTS])
def test_rows_are_read_to_the_eof_as_pymysql_reads_them(status: int) -> None:
    converters: list[Column] = [("ascii", int), ("utf8", None)]
    eof = b"\xfe" + struct.pack("<hh", 3, status)
    # A row whose first byte is the EOF's (an eight-byte length) is a row, as is one of
    # MAX_PACKET_LEN bytes or more, sent in parts.
    long = packet([None, b"x" * 300])
    wide = b"\xfe" + (1).to_bytes(8, "little") + b"7" + packet([b"ok"])
    huge = packet([b"9", b"y" * MAX_PACKET_LEN])
    payloads = [packet([b"1", b"a"]), packet([None, b"\xc3\xbc"]), packet([b"3"]), long, wide]
    payloads += [huge, eof]
    lean = _result_of(LeanResult, stream(payloads), converters)
    plain = _result_of(MySQLResult, stream(payloads), converters)
    lean._read_rowdata_packet()
    plain._read_rowdata_packet()
    assert lean.rows == plain.rows
    assert lean.rows[:5] == ((1, "a"), (None, "ü"), (3,), (None, "x" * 300), (7, "ok"))
    assert lean.rows[5] == (9, "y" * MAX_PACKET_LEN)
    assert lean.affected_rows == plain.affected_rows == 6
    assert lean.warning_count == plain.warning_count == 3
    assert lean.has_next == plain.has_next
    assert bool(lean.has_next) is bool(status & SERVER_MORE_RESULTS_EXISTS)
    assert lean.connection is plain.connection is None


def test_an_error_among_the_rows_raises_as_in_pymysql() -> None:
    """An error after some rows (a subquery of more than one row, found as the rows are
    sent): the server's error, in both."""
    converters: list[Column] = [("ascii", int)]
    error = b"\xff" + (1242).to_bytes(2, "little") + b"#21000Subquery returns more than 1 row"
    payloads = [packet([b"1"]), error]
    for kind in (LeanResult, MySQLResult):
        result = _result_of(kind, stream(payloads), converters)
        with pytest.raises(pymysql.err.OperationalError, match="more than 1 row"):
            result._read_rowdata_packet()


def test_descriptions_without_an_eof_after_them_are_refused() -> None:
    """A driver that stopped asking for the EOF packet would hand a row where it comes:
    refused, never parsed as one."""
    description = (
        b"\x03def\x00\x00\x00\x01a\x00\x0c\x3f\x00\x01\x00\x00\x00\x08\x81\x00\x00\x00\x00"
    )
    result = LeanResult.__new__(LeanResult)
    result.unbuffered_active = False
    result.field_count = 1
    result.connection = stream([description, packet([b"7"])])
    with pytest.raises(pymysql.err.InternalError, match="no EOF packet"):
        result._get_descriptions()
    result.connection = stream([description, b"\xfe\x00\x00\x02\x00"])
    result._get_descriptions()
    assert [column[0] for column in result.description] == ["a"]
