"""Each family's pieces, gathered site by site and given out in parts: how the protobuf
encoder holds a scrape's exposition (each site's fields of a family, kept from scrape to
scrape as the text writer's texts are: `kept_texts`); the text writer gives out its texts
in parts of `SITES_PER_PART` sites too.

A family needs every site, so a scrape's families are gathered whole before the first
is given out. A part is a list of its pieces, not joined, and tells which sites' they
are and whether any was written anew since the writer's kept texts it took: a part of
the same sites, none written anew, is the last answer's (`web.kept_gzip` sends it as it
was deflated then); a part is joined only where it is coded (deflated anew, or sent as
it is). Neither a family (a thousand stores' largest text is 3.3 MB) nor the answer is
ever joined whole, which held the answer twice more (that body, and the socket's buffer
of it), 31 MiB over a thousand stores' resident size at every scrape
(docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from actionscheduler_exporter.metrics.catalog import MetricDef

SITES_PER_PART = 64

# What tells a part's pieces from others: each site's key (its label pairs), or a small
# piece itself (a family's head), compared by value.
Mark = Hashable
# The generations of the kept texts a part's pieces were taken from and that it left
# (`Part.kept`): a writer's counts, or a tuple of them when several processes' sites
# are joined (`joined`).
Generation = Hashable


class Part(list[bytes]):
    """A part of the exposition: its pieces, whose bytes follow one another; `marks`,
    what they are of (None: a part coded anew every time, such as the process's own);
    `fresh`, whether a piece was written anew at this scrape; `kept`, the generations
    of the writer's kept texts (`kept_texts.KeptTexts.generation`) its pieces were taken
    from and that it left (None: pieces marked by their own bytes). A part with the
    marks of the part at its place in an answer that left the generation it was taken
    from, none of its pieces fresh, is that part's text."""

    __slots__ = ("fresh", "kept", "marks")

    def __init__(
        self,
        pieces: Iterable[bytes] = (),
        marks: tuple[Mark, ...] | None = None,
        fresh: bool = False,
        kept: tuple[Generation, Generation] | None = None,
    ) -> None:
        super().__init__(pieces)
        self.marks = marks
        self.fresh = fresh
        self.kept = kept


@dataclass(slots=True)
class Family:
    """A family's pieces, in the sites' order: each site's key, and whether its piece was
    written anew at this scrape."""

    pieces: list[bytes] = field(default_factory=list)
    sites: list[Mark] = field(default_factory=list)
    fresh: list[bool] = field(default_factory=list)


class Gathered:
    """Each family's pieces, in the sites' order. The sites of a run with the same
    families in the same places (most of a fleet: `kept_texts.Layout`) are turned into
    families at once, in C (`zip`), rather than piece by piece: a thousand stores' 46,000
    pieces took a third of the text writer's own time."""

    def __init__(self) -> None:
        self._families: dict[str, Family] = {}  # by family name
        self._metrics: tuple[MetricDef, ...] = ()  # the families of the run's sites
        self._run: list[Sequence[bytes]] = []
        self._sites: list[Mark] = []
        self._fresh: list[Sequence[bool]] = []

    def add(
        self,
        metrics: tuple[MetricDef, ...],
        pieces: Sequence[bytes],
        site: Mark,
        fresh: Iterable[int] | None,
    ) -> None:
        """A site's piece of each of `metrics`, in that order; `fresh`: the places of
        those written anew at this scrape (None: all)."""
        if metrics is not self._metrics:
            self._end_run()
            self._metrics = metrics
        self._run.append(pieces)
        self._sites.append(site)
        if fresh is None:
            flags = [True] * len(pieces)
        else:
            flags = [False] * len(pieces)
            for place in fresh:
                flags[place] = True
        self._fresh.append(flags)

    def finished(self) -> dict[str, Family]:
        """Each family, by its name, once every site is added."""
        self._end_run()
        return self._families

    def _end_run(self) -> None:
        if not self._run:
            return
        families, sites = self._families, self._sites
        columns = zip(*self._run, strict=True)
        fresh = zip(*self._fresh, strict=True)
        for metric, column, flags in zip(self._metrics, columns, fresh, strict=True):
            found = families.get(metric.name)
            if found is None:
                families[metric.name] = Family(list(column), list(sites), list(flags))
            else:
                found.pieces += column
                found.sites += sites
                found.fresh += flags
        self._run, self._sites, self._fresh = [], [], []


@dataclass(slots=True)
class Gathering:
    """One process's sites' families, each family's pieces in its sites' order (what a
    helper process sends: `split`), the generations of the kept texts they were taken
    from and left, and how many sites they are of."""

    families: dict[str, Family]
    generations: tuple[Generation, Generation]
    sites: int


def joined(own: Gathering, others: Sequence[Gathering]) -> Gathering:
    """`own`'s families with the others' sites after its own in each (its families
    extended in place); the generations those of each, in order. Every process's sites
    are other sites (each process serves a part of them: `sharding`), and the order is
    the same at every scrape, so a part of the joined family is known by its marks."""
    if not others:
        return own
    families = own.families
    for other in others:
        for name, family in other.families.items():
            found = families.get(name)
            if found is None:  # a copy: the joined family grows, the other's is kept
                families[name] = Family(list(family.pieces), list(family.sites), list(family.fresh))
            else:
                found.pieces += family.pieces
                found.sites += family.sites
                found.fresh += family.fresh
    taken = (own.generations[0], *(other.generations[0] for other in others))
    left = (own.generations[1], *(other.generations[1] for other in others))
    return Gathering(families, (taken, left), own.sites + sum(o.sites for o in others))


def in_parts(
    name: str, family: Family, kept: tuple[Generation, Generation], head: bytes | None = None
) -> Iterator[Part]:
    """A family's pieces, `SITES_PER_PART` sites' a part, after its `head` in the first
    part (the head's own mark its bytes); `kept`: as `Part.kept`. Each part's marks start
    with the family's `name`: a part is known by its place in the answer, and when a
    family's parts grow in number (a site comes past a multiple of `SITES_PER_PART`),
    the places of the next families' parts move onto others' of the same sites."""
    pieces, sites, fresh = family.pieces, family.sites, family.fresh
    first = [] if head is None else [head]
    yield Part(
        [*first, *pieces[:SITES_PER_PART]],
        (name, *first, *sites[:SITES_PER_PART]),
        any(fresh[:SITES_PER_PART]),
        kept,
    )
    for start in range(SITES_PER_PART, len(pieces), SITES_PER_PART):
        end = start + SITES_PER_PART
        yield Part(pieces[start:end], (name, *sites[start:end]), any(fresh[start:end]), kept)
