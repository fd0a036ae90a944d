"""The gzip coding of an exposition whose parts mostly repeat from scrape to scrape.

A thousand quiet stores' answer is 11.7 MB of text, of which about nine tenths are the
same bytes at the next scrape: the writers hand each family's text out in parts whose
pieces (a site's lines of a family) are the same objects while they do not change
(`exposition.kept_texts`). Each part is deflated on its own, ending on a byte boundary
(a sync flush), so that the parts' deflated bytes follow one another as one stream; a
part whose pieces are the same objects as the part at its place at the last scrape is
sent as it was deflated then. Deflating the whole answer took a tenth of the exporter's
CPU per scrape (docs/performance.md).

The gzip trailer's CRC-32 of the whole text is the last scrape's up to the first part
that changed, then combined from each part's (`combined`), so that a part sent as kept
is not read again.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from operator import is_

from actionscheduler_exporter.exposition.family_parts import Part

# Level 1: the CPU is the scrape's, the bytes are not (a tenth of the text, as one stream).
LEVEL = 1
# A gzip member's head: deflate, no flags, no time, the fastest level, an unknown system.
_HEAD = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff"
# The last block of the stream: final, fixed codes, empty.
_LAST_BLOCK = b"\x03\x00"
_ZEROS = memoryview(bytes(256 * 1024))
_ALL_ONES = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class _Deflated:
    pieces: tuple[bytes, ...]  # held, so that their identity at the next scrape is theirs
    data: bytes  # deflated on its own, ending on a byte boundary
    crc: int  # of the text
    size: int


class KeptGzip:
    """The deflated parts of the last scrape's answer, by their place in it, the CRC-32
    and length of its text up to each of them, and the content type they were of."""

    def __init__(self) -> None:
        self._kept: list[_Deflated] = []
        self._running: list[tuple[int, int]] = []
        self._kind = ""

    def gzipped(self, parts: Iterable[Part], kind: str) -> Generator[bytes, None, None]:
        """The parts as one gzip member, as they are taken; `kind`: the answer's content
        type (an answer of another type keeps nothing of this one's, as the writers keep
        one format's texts). A scrape running meanwhile finds nothing kept and deflates
        every part; an answer not taken to its end (the client gone) keeps nothing.

        While every part so far is the last scrape's, the text so far is too, and so is
        its CRC-32: only from the first part that changed on is each part's combined."""
        same_kind = kind == self._kind
        last, self._kept = self._kept if same_kind else [], []
        last_running, self._running = self._running if same_kind else [], []
        self._kind = kind
        made: list[_Deflated] = []
        running: list[tuple[int, int]] = []
        crc = size = 0
        unchanged = True  # every part so far is the last scrape's at its place
        yield _HEAD
        for place, part in enumerate(parts):
            kept = last[place] if place < len(last) else None
            if kept is None or not _same_pieces(kept.pieces, part):
                kept = _deflated(part)
                unchanged = False
            if unchanged:
                crc, size = last_running[place]
            else:
                crc = combined(crc, kept.crc, kept.size)
                size += kept.size
            made.append(kept)
            running.append((crc, size))
            yield kept.data
        self._kept, self._running = made, running
        yield _LAST_BLOCK + struct.pack("<II", crc, size & 0xFFFFFFFF)


def _same_pieces(kept: tuple[bytes, ...], part: Part) -> bool:
    return len(kept) == len(part) and all(map(is_, kept, part))


def _deflated(part: Part) -> _Deflated:
    text = b"".join(part)
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    data = compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return _Deflated(tuple(part), data, zlib.crc32(text), len(text))


def combined(first: int, second: int, second_size: int) -> int:
    """The CRC-32 of two texts one after the other, from each one's and the second's
    length (zlib's crc32_combine, which Python's zlib does not offer). CRC-32 is affine
    in its text: the first's register, carried through as many zeros as the second is
    long, is added to the second's. zlib inverts the register before and after, so the
    first's is given inverted, and the result inverted back."""
    if not first or not second_size:
        return first ^ second
    size = second_size
    register = first ^ _ALL_ONES
    while size > len(_ZEROS):
        register = zlib.crc32(_ZEROS, register)
        size -= len(_ZEROS)
    return zlib.crc32(_ZEROS[:size], register) ^ _ALL_ONES ^ second
