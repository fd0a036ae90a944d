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
# A gzip member's head: deflate, no flags, no time, the fastest level (XFL 4: LEVEL 1),
# an unknown system.
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


# What is kept at a place: the part as deflated, or, for a part deflated anew where one
# was kept (one that changes at every scrape, mostly: its durations, its ages), only the
# identity of its pieces, so that a part that has settled is kept at the next scrape.
_Kept = _Deflated | int


class KeptGzip:
    """The deflated parts of the last gzip answer, by their place in it, the CRC-32 and
    length of its text up to each of them, and the content type they were of."""

    def __init__(self) -> None:
        self._kept: list[_Kept | None] = []
        self._running: list[tuple[int, int]] = []
        self._kind = ""

    def gzipped(self, parts: Iterable[Part], kind: str) -> Generator[bytes, None, None]:
        """The parts as one gzip member, as they are taken; `kind`: the answer's content
        type (an answer of another type keeps nothing of this one's, as the writers keep
        one format's texts). A scrape running meanwhile finds nothing kept and deflates
        every part; an answer not taken to its end (the client gone) keeps nothing.

        While every part so far is the last answer's, the text so far is too, and so is
        its CRC-32: only from the first part that changed on is each part's combined."""
        same_kind = kind == self._kind
        last = self._kept if same_kind else []
        last_running = self._running if same_kind else []
        self.forget()
        kept_now: list[_Kept | None] = []
        running: list[tuple[int, int]] = []
        crc = size = 0
        unchanged = True  # every part so far is the last answer's at its place
        yield _HEAD
        for place, part in enumerate(parts):
            before = last[place] if place < len(last) else None
            if place < len(last):
                last[place] = None  # let go of as it is passed
            kept: _Kept
            if isinstance(before, _Deflated) and _same_pieces(before.pieces, part):
                deflated = kept = before
            else:
                unchanged = False
                deflated = _deflated(part)
                pieces = _identity(part)
                # Kept when new here, or when its pieces are those of the last answer's
                # part deflated anew here: it has settled.
                settled = before is None or before == pieces
                kept = deflated if settled else pieces
            if unchanged:
                crc, size = last_running[place]
            else:
                crc = combined(crc, deflated.crc, deflated.size)
                size += deflated.size
            kept_now.append(kept)
            running.append((crc, size))
            yield deflated.data
        self._kept, self._running, self._kind = kept_now, running, kind
        yield _LAST_BLOCK + struct.pack("<II", crc, size & 0xFFFFFFFF)

    def forget(self) -> None:
        """Lets go of what is kept: the scraper asks for an answer of another coding."""
        self._kept, self._running, self._kind = [], [], ""


def _identity(part: Part) -> int:
    """Its pieces' identity, as a number: only ever a reason to keep a part, never to
    use one (an identity that comes again by chance keeps a part one answer longer)."""
    return hash(tuple(map(id, part)))


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
