"""Each family's pieces, gathered site by site and given out in parts: how the protobuf
encoder holds a scrape's exposition (each site's fields of a family, kept from scrape to
scrape as the text writer's texts are: `kept_texts`); the text writer gives out its texts
in parts of `SITES_PER_JOIN` sites too.

A family needs every site, so a scrape's families are gathered whole before the first
is given out; gathered as one small object per sample they spread over the interpreter's
small-object memory, which stays the process's after the scrape (the text writing's peak
for a thousand stores: 52 MiB held at once, 28 MiB joined every 64 sites). The parts are
then given out in turn and let go of: a family is never joined whole (a thousand stores'
largest text is 3.3 MB), nor the exposition into one body, which was held twice more
(that body, and the socket's buffer of it), 31 MiB over a thousand stores' resident size
at every scrape (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

SITES_PER_JOIN = 64

Piece = TypeVar("Piece", str, bytes)


def join_pending(
    pending: dict[str, list[Piece]],
    joined: dict[str, list[bytes]],
    join: Callable[[list[Piece]], bytes],
) -> None:
    """Each family's pieces gathered since the last call, joined into one part."""
    for name, family in pending.items():
        if family:
            joined.setdefault(name, []).append(join(family))
            family.clear()


def given_out(head: bytes, parts: list[bytes]) -> Iterator[bytes]:
    """A family's head, then its parts, each let go of once taken."""
    yield head
    while parts:
        yield parts.pop(0)
