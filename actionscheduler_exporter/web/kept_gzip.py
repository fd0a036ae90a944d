"""The gzip coding of an exposition whose parts mostly repeat from scrape to scrape.

A thousand quiet stores' answer is 14 MB of text, of which about nine tenths are the
same bytes at the next scrape: the writers hand each family's text out in parts whose
pieces (a site's lines of a family) are kept while they do not change
(`exposition.kept_texts`), and each part tells which sites' pieces it holds and whether
any was written anew (`family_parts.Part`). Each part is deflated on its own, ending on
a byte boundary (a full flush), so that the parts' deflated bytes follow one another as
one stream; a part of the same family and sites as the part at its place in the last
answer, none written anew since, is sent as it was deflated then (docs/performance.md).

The gzip trailer's CRC-32 of the whole text is the last scrape's up to the first part
that changed, then combined from each part's, so that a part sent as kept is not read
again. The deflating and the CRC-32 are ISA-L's where it is installed (`deflaters`).
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain

from actionscheduler_exporter.exposition.family_parts import Generation, Mark, Part
from actionscheduler_exporter.web import deflaters
from actionscheduler_exporter.web.deflaters import (
    FULL_FLUSH,
    GZIP_WINDOW,
    RAW_WINDOW,
    Compressor,
    Deflater,
)

# Level 1: the CPU is the scrape's, the bytes are not (a tenth of the text, as one stream).
LEVEL = 1
# A gzip member's head: deflate, no flags, no time, the fastest level (XFL 4: LEVEL 1),
# an unknown system.
_HEAD = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff"
# The last block of the stream: final, fixed codes, empty.
_LAST_BLOCK = b"\x03\x00"


@dataclass(frozen=True, slots=True)
class _Deflated:
    data: bytes  # deflated on its own, ending on a byte boundary
    crc: int  # of the text
    size: int


@dataclass(frozen=True, slots=True)
class _Place:
    """A part kept at its place in the answer: its pieces' marks, and where its
    deflated bytes are in the answer's one text of them."""

    marks: tuple[Mark, ...]
    start: int
    end: int
    crc: int
    size: int


class KeptGzip:
    """The deflated parts of the last gzip answer, by their place in it and their marks
    (`family_parts.Part`), the CRC-32 and length of its text up to each of them, and
    the content type they were of.

    The pieces themselves are not held: held (to know them by their identity), a
    thousand stores' answer kept 10 MiB more of the process's memory than the writers'
    kept texts did. The deflated bytes are held as one text, not one per part."""

    def __init__(self, deflater: Deflater | None = None) -> None:
        """`deflater`: the library that deflates (`deflaters.CHOSEN` when None)."""
        self.deflater = deflaters.CHOSEN if deflater is None else deflater
        self._places: list[_Place | None] = []
        self._deflated = b""
        self._running: list[tuple[int, int]] = []
        self._kind = ""
        self._generation: Generation = -1

    def gzipped(self, parts: Iterable[Part], kind: str) -> Generator[bytes, None, None]:
        """The parts as one gzip member, as they are taken; `kind`: the answer's content
        type (an answer of another type keeps nothing of this one's, as the writers keep
        one format's texts). A scrape running meanwhile finds nothing kept and deflates
        every part; an answer not taken to its end (the client gone) keeps nothing.

        While every part so far is the last answer's, the text so far is too, and so is
        its CRC-32: only from the first part that changed on is each part's combined."""
        given = iter(parts)
        first = next(given, None)
        if first is not None and first.marks is None:
            # An answer that is coded anew every time (a few sites'): one stream.
            self.forget()
            yield from _streamed(chain((first,), given), self.deflater)
            return
        parts = given if first is None else chain((first,), given)
        same_kind = kind == self._kind
        last = self._places if same_kind else []
        last_deflated, last_running = self._deflated, self._running
        last_generation = self._generation
        self.forget()
        generation: Generation = -1  # of the writer's kept texts this answer leaves
        places: list[_Place | None] = []
        deflated: list[bytes] = []
        kept_size = 0  # of `deflated`
        running: list[tuple[int, int]] = []
        crc = size = 0
        unchanged = True  # every part so far is the last answer's at its place
        compressor: Compressor | None = None  # one for the parts deflated anew
        deflater = self.deflater
        combine = deflater.crc32_combine
        yield _HEAD
        for place, part in enumerate(parts):
            before = last[place] if place < len(last) else None
            marks = part.marks
            kept_from = part.kept
            if kept_from is not None:
                generation = kept_from[1]
            if (
                before is not None
                and not part.fresh
                and (kept_from is None or kept_from[0] == last_generation)
                and before.marks == marks
            ):
                made = _Deflated(last_deflated[before.start : before.end], before.crc, before.size)
            else:
                unchanged = False
                if compressor is None:
                    compressor = deflater.compressor(LEVEL, RAW_WINDOW)
                made = _deflated(part, compressor, deflater)
            kept = None
            if marks is not None:
                end = kept_size + len(made.data)
                kept = _Place(marks, kept_size, end, made.crc, made.size)
                deflated.append(made.data)
                kept_size = end
            if unchanged:
                crc, size = last_running[place]
            else:
                crc = combine(crc, made.crc, made.size)
                size += made.size
            places.append(kept)
            running.append((crc, size))
            yield made.data
        self._places, self._running, self._kind = places, running, kind
        self._deflated, self._generation = b"".join(deflated), generation
        yield _LAST_BLOCK + struct.pack("<II", crc, size & 0xFFFFFFFF)

    def forget(self) -> None:
        """Lets go of what is kept: the scraper asks for an answer of another coding."""
        self._places, self._deflated, self._running, self._kind = [], b"", [], ""
        self._generation = -1


def _streamed(parts: Iterable[Part], deflater: Deflater) -> Iterator[bytes]:
    """The parts as one gzip stream, each compressed as it comes."""
    compressor = deflater.compressor(LEVEL, GZIP_WINDOW)
    for part in parts:
        if compressed := compressor.compress(b"".join(part)):
            yield compressed
    yield compressor.flush()


def _deflated(part: Part, compressor: Compressor, deflater: Deflater) -> _Deflated:
    """The part deflated as a piece that stands alone: a full flush ends it on a byte
    boundary and lets the compressor forget it, so that nothing after it refers back
    to it, nor it to anything before."""
    text = b"".join(part)
    data = compressor.compress(text) + compressor.flush(FULL_FLUSH)
    return _Deflated(data, deflater.crc32(text), len(text))
