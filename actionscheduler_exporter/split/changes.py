"""What a helper sends after its first answer: only the pieces written anew since its
last answer, where a family's sites are the same, in the same order.

A thousand quiet stores' families are mostly the same from one scrape to the next
(`exposition.kept_texts`): sending half of them whole was 7 MB pickled and unpickled at
every scrape, on the path of the answer. A piece not written anew is the one the last
answer held at its place, so the serving process, which holds that answer, takes it
from there. Answers are applied in the order they are sent, each to the one before
(`Changes.base`); a serving process that does not hold the base (it never should) asks
for a whole answer next."""

from __future__ import annotations

from dataclasses import dataclass

from actionscheduler_exporter.exposition.family_parts import Family, Gathering, Generation


@dataclass(frozen=True, slots=True)
class FamilyChanges:
    """The pieces of a family written anew, by their places; the others are the last
    answer's."""

    places: list[int]
    pieces: list[bytes]


@dataclass(frozen=True)
class Changes:
    """A gathering, as changes to the helper's answer `base`."""

    base: int
    families: dict[str, Family | FamilyChanges]
    generations: tuple[Generation, Generation]
    sites: int


class BaseMissingError(Exception):
    """Changes to an answer that is not the one held."""


def changes(last: Gathering, now: Gathering, base: int) -> Changes:
    """`now` as changes to `last` (the answer `base`): a family whose sites are those of
    `last`'s, in order, as its pieces written anew; any other whole."""
    families: dict[str, Family | FamilyChanges] = {}
    for name, family in now.families.items():
        before = last.families.get(name)
        if before is not None and before.sites == family.sites:
            places = [place for place, fresh in enumerate(family.fresh) if fresh]
            families[name] = FamilyChanges(places, [family.pieces[place] for place in places])
        else:
            families[name] = family
    return Changes(base, families, now.generations, now.sites)


def applied(held: Gathering, change: Changes) -> Gathering:
    """The gathering that `change` describes, from `held` (the answer it changes); `held`
    itself is left as it is."""
    families: dict[str, Family] = {}
    for name, family in change.families.items():
        if isinstance(family, Family):
            families[name] = family
            continue
        before = held.families.get(name)
        if before is None:
            raise BaseMissingError(f"changes to a family the held answer lacks: {name}")
        pieces = list(before.pieces)
        fresh = [False] * len(pieces)
        for place, piece in zip(family.places, family.pieces, strict=True):
            pieces[place] = piece
            fresh[place] = True
        families[name] = Family(pieces, before.sites, fresh)
    return Gathering(families, change.generations, change.sites)
