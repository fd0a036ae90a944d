"""The deflate coder and the CRC-32 of the gzip answers: ISA-L's (python-isal) where it is
installed, zlib's where it is not.

A thousand quiet stores' answer deflates about 3.9 MB of changed parts at each scrape and
combines the CRC-32 of each part after the first that changed (most of its 14.9 MB): on
one scrape's parts zlib took 6.5 ms for the deflating, 0.9 ms for the changed parts'
CRC-32 and 3.7 ms for combining all 739 (over zeros: Python's zlib does not offer zlib's
crc32_combine), ISA-L 2.3, 0.1 and 0.2 ms, its level 1 a few per cent smaller
(docs/performance.md). Both write deflate that any gzip reader reads, and both
end a part on a byte boundary at a full flush, with nothing after it referring back.
python-isal has wheels for x86-64 and ARM64 (pyproject.toml installs it there); on other
machines zlib does the same work, more slowly.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# The raw deflate window (no container), and the gzip container around it (16 + 15).
RAW_WINDOW = -zlib.MAX_WBITS
GZIP_WINDOW = 16 + zlib.MAX_WBITS
FULL_FLUSH = zlib.Z_FULL_FLUSH  # the same number in both
_ZEROS = memoryview(bytes(256 * 1024))
_ALL_ONES = 0xFFFFFFFF


class Compressor(Protocol):
    def compress(self, data: bytes, /) -> bytes: ...

    def flush(self, mode: int = ..., /) -> bytes: ...


@dataclass(frozen=True)
class Deflater:
    """A library's deflate coder (`level`, `window`) and CRC-32 (of a text, from a
    register; and of two texts one after the other, from each one's and the second's
    length)."""

    name: str
    compressor: Callable[[int, int], Compressor]
    crc32: Callable[[bytes], int]
    crc32_combine: Callable[[int, int, int], int]


def combined_over_zeros(first: int, second: int, second_size: int) -> int:
    """The CRC-32 of two texts one after the other, from each one's and the second's
    length, with what Python's zlib offers. CRC-32 is affine in its text: the first's
    register, carried through as many zeros as the second is long, is added to the
    second's. zlib inverts the register before and after, so the first's is given
    inverted, and the result inverted back."""
    if not first or not second_size:
        return first ^ second
    size = second_size
    register = first ^ _ALL_ONES
    while size > len(_ZEROS):
        register = zlib.crc32(_ZEROS, register)
        size -= len(_ZEROS)
    return zlib.crc32(_ZEROS[:size], register) ^ _ALL_ONES ^ second


def _zlib_compressor(level: int, window: int) -> Compressor:
    return zlib.compressobj(level, zlib.DEFLATED, window)


ZLIB = Deflater("zlib", _zlib_compressor, zlib.crc32, combined_over_zeros)


def _isal() -> Deflater | None:
    try:
        from isal import isal_zlib
    except ImportError:
        return None

    def compressor(level: int, window: int) -> Compressor:
        return isal_zlib.compressobj(level, isal_zlib.DEFLATED, window)

    return Deflater("isal", compressor, isal_zlib.crc32, isal_zlib.crc32_combine)


ISAL = _isal()
# What the answers are coded with: every one installed, the fastest first.
INSTALLED = tuple(found for found in (ISAL, ZLIB) if found is not None)
CHOSEN = INSTALLED[0]
