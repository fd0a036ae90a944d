"""A PyMySQL answer parsed with fewer Python calls: its rows in one loop, its column
descriptions once per distinct set, its packets read as bytes.

A thousand stores' rounds spend about a fifth of their Python calls in the driver's
parsing of the read-ahead's batches (docs/performance.md): PyMySQL reads each value of a
row through three methods of its packet class, and parses each column's description
(sixteen stores' batch has fourteen) field by field at every answer, although a
statement's descriptions are the same bytes from one answer to the next. Here a row's
values are read in one loop over the packet's bytes, each turned into what PyMySQL makes
of it by the same decoding and converter; and a set of descriptions seen before is
taken as it was parsed then, the new ones parsed by PyMySQL's own code. The packets
after an answer's first (its descriptions, rows and end) are read as their bytes
(`read_payload`), where PyMySQL made each a packet object and asked it what it was in
three more calls. What comes out is what PyMySQL makes (`tests/unit/test_lean_rows.py`
compares both on generated packets, `tests/test_lean_rows.py` on a real server's
answers).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pymysql.connections
from pymysql.connections import MAX_PACKET_LEN
from pymysql.constants import CR
from pymysql.constants.SERVER_STATUS import SERVER_MORE_RESULTS_EXISTS
from pymysql.converters import conversions
from pymysql.protocol import MysqlPacket

from actionscheduler_exporter.db.tls_contexts import SharedContextConnection

# The length prefixes of the text protocol (a "length-encoded integer"): NULL, then the
# number of bytes of a longer length after it.
_NULL = 0xFB
_TWO_BYTES, _THREE_BYTES, _EIGHT_BYTES = 0xFC, 0xFD, 0xFE
_WIDE = {_TWO_BYTES: 2, _THREE_BYTES: 3, _EIGHT_BYTES: 8}

# The converters a connection has unless it is given others: a set of descriptions parsed
# for one such connection holds for every other.
_DEFAULT_DECODERS = {code: convert for code, convert in conversions.items() if type(code) is int}

# Parsed sets of column descriptions, by their packets' bytes and the connection's
# decoding of text; only sets that name no database (the hot statements' and the
# batches' computed columns: a few per server): a statement over real tables names its
# database in them, and a thousand stores' would make a set each. Bounded all the same:
# past the bound the cache starts over, and the sets in use come back at their next answer.
MAX_DESCRIPTIONS = 512

# One parsed set: the fields, each column's (encoding, converter), the description, and
# the converters as `read_row` applies them.
_Parsed = tuple[tuple[Any, ...], tuple[tuple[str | None, Any], ...], tuple[Any, ...], Any]
_descriptions: dict[tuple[object, ...], _Parsed] = {}
_lock = threading.Lock()

if TYPE_CHECKING:
    # The type stubs leave out the parts of PyMySQL's result that are replaced here.
    _MySQLResult = Any
else:
    _MySQLResult = pymysql.connections.MySQLResult


Converters = list[tuple[str | None, Callable[[Any], Any] | None]]

# Converters that make the same of a value's ASCII bytes as of its text: the ASCII
# decoding before them is left out (a call per value, most of a batch's values).
_TAKE_BYTES = frozenset({int, float})


def lean_converters(converters: Converters) -> Converters:
    """Each column's (encoding, converter) as `read_row` applies them: PyMySQL's, without
    the ASCII decoding of a whole or floating number, which `int` and `float` read as
    bytes just as well (a value that is not one fails in both)."""
    return [
        (None, converter) if encoding == "ascii" and converter in _TAKE_BYTES
        else (encoding, converter)
        for encoding, converter in converters
    ]  # fmt: skip


def read_row(data: bytes, converters: Converters) -> tuple[Any, ...]:
    """A row packet's values, as `MySQLResult._read_row_from_packet` makes them with the
    columns' `lean_converters`: each length-prefixed value decoded and converted by its
    column's pair, NULL as None, and the row ended early (fewer values) where the packet
    ends."""
    row: list[Any] = [None] * len(converters)
    end = len(data)
    position = 0
    for place, (encoding, converter) in enumerate(converters):
        if position >= end:
            return tuple(row[:place])  # fewer values than columns: PyMySQL ends there too
        length = data[position]
        position += 1
        if length >= _NULL:
            if length in _WIDE and position + _WIDE[length] > end:
                raise pymysql.err.InternalError("a row's value length is cut short")
            if length == _TWO_BYTES:
                length = data[position] | data[position + 1] << 8
                position += 2
            elif length == _THREE_BYTES:
                length = data[position] | data[position + 1] << 8 | data[position + 2] << 16
                position += 3
            elif length == _EIGHT_BYTES:
                length = int.from_bytes(data[position : position + 8], "little")
                position += 8
            else:  # NULL (and 0xFF, which PyMySQL reads as one too)
                continue
        value: Any = data[position : position + length]
        position += length
        if position > end:
            raise pymysql.err.InternalError("a row's value is longer than its packet")
        if encoding is not None:
            value = value.decode(encoding)
        if converter is not None:
            value = converter(value)
        row[place] = value
    return tuple(row)


def read_payload(connection: Any) -> bytes:
    """The next packet's payload, as `Connection._read_packet` reads it (its parts, when
    it comes in several, joined), with the same checks: a packet out of sequence closes
    the connection and raises, and an error packet raises the server's error. Only after
    an answer's first packet, which `_read_packet` read and set the socket's timeout
    for."""
    read = connection._read_bytes
    parts: list[bytes] = []
    while True:
        header = read(4)
        length = header[0] | header[1] << 8 | header[2] << 16
        if header[3] != connection._next_seq_id:
            connection._force_close()
            if header[3] == 0:  # MariaDB's error packet at a shutdown
                raise pymysql.err.OperationalError(
                    CR.CR_SERVER_LOST,
                    "Lost connection to MySQL server during query",
                )
            raise pymysql.err.InternalError(
                f"Packet sequence number wrong - got {header[3]} expected {connection._next_seq_id}"
            )
        connection._next_seq_id = (connection._next_seq_id + 1) % 256
        data: bytes = read(length)
        if length < MAX_PACKET_LEN and not parts:
            break  # nearly every packet: one part
        parts.append(data)
        if length < MAX_PACKET_LEN:
            data = b"".join(parts)
            break
    if data[0] == 0xFF:  # as `_read_packet`: an error ends an unbuffered answer too
        result = connection._result
        if result is not None and result.unbuffered_active is True:
            result.unbuffered_active = False
        MysqlPacket(data, connection.encoding).raise_for_error()
    return data


# An EOF packet's warnings and server status, after its first byte (PyMySQL's
# `EOFPacketWrapper`).
_EOF = struct.Struct("<xhh")


class _Replay:
    """Hands PyMySQL's description parsing the packets already read, as the connection
    would (`_read_packet`), with the settings the parsing reads."""

    def __init__(self, connection: Any, packets: list[bytes]) -> None:
        self.use_unicode = connection.use_unicode
        self.encoding = connection.encoding
        self.decoders = connection.decoders
        self._packets = iter(packets)

    def _read_packet(self, packet_type: type[MysqlPacket] = MysqlPacket) -> MysqlPacket:
        return packet_type(next(self._packets), self.encoding)


class LeanResult(_MySQLResult):  # type: ignore[misc]
    """A buffered or unbuffered answer of a `LeanConnection`."""

    connection: Any
    field_count: int
    fields: list[Any]
    converters: Converters
    description: tuple[Any, ...]
    _lean: Converters  # `read_row`'s, set with the descriptions

    def _read_row_from_packet(self, packet: Any) -> tuple[Any, ...]:
        return read_row(packet.get_all_data(), self._lean)

    def _read_rowdata_packet(self) -> None:
        """A buffered answer's rows, each read from its packet's bytes, until the EOF
        packet, as `MySQLResult._read_rowdata_packet` reads them."""
        connection, lean = self.connection, self._lean
        rows = []
        while True:
            data = read_payload(connection)
            if data[0] == 0xFE and len(data) < 9:  # the EOF packet
                self.warning_count, status = _EOF.unpack_from(data)
                self.has_next = status & SERVER_MORE_RESULTS_EXISTS
                self.connection = None
                break
            rows.append(read_row(data, lean))
        self.affected_rows = len(rows)
        self.rows = tuple(rows)

    def _get_descriptions(self) -> None:
        connection = self.connection
        # The descriptions and the EOF packet after them, as PyMySQL reads them.
        packets = [read_payload(connection) for _ in range(self.field_count + 1)]
        end = packets[-1]
        if not (end[:1] == b"\xfe" and len(end) < 9):
            # What PyMySQL asserts: a driver that stopped asking for it (the protocol's
            # DEPRECATE_EOF) would hand a row here.
            raise pymysql.err.InternalError("no EOF packet after a result's column descriptions")
        # The EOF's status flags are not part of the key: they change with the session's
        # state, the descriptions do not.
        key = (connection.use_unicode, connection.encoding, *packets[:-1])
        default = connection.decoders == _DEFAULT_DECODERS
        parsed = _descriptions.get(key) if default else None
        if parsed is None:
            self.connection = _Replay(connection, packets)
            try:
                super()._get_descriptions()
            finally:
                self.connection = connection
            self._lean = lean_converters(self.converters)
            if not default or any(field.db for field in self.fields):
                return
            parsed = (tuple(self.fields), tuple(self.converters), self.description, self._lean)
            with _lock:
                if len(_descriptions) >= MAX_DESCRIPTIONS:
                    _descriptions.clear()
                _descriptions[key] = parsed
            return
        fields, converters, self.description, self._lean = parsed
        self.fields, self.converters = list(fields), list(converters)


class LeanConnection(SharedContextConnection):
    """A connection whose answers are `LeanResult`s."""

    def _read_query_result(self, unbuffered: bool = False) -> int:
        # PyMySQL's own steps, with the result class replaced.
        self._result = None
        result = LeanResult(self)
        if unbuffered:
            result.init_unbuffered_query()
        else:
            result.read()
        self._result = result
        if result.server_status is not None:
            self.server_status = result.server_status
        return result.affected_rows
