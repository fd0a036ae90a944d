"""A helper's answers after its first, as the pieces written anew (`split.changes`):
applied to the answer before, they give back every family as the helper gathered it."""

from __future__ import annotations

import pytest

from actionscheduler_exporter.exposition.family_parts import Family, Gathering
from actionscheduler_exporter.split.changes import (
    BaseMissingError,
    FamilyChanges,
    applied,
    changes,
)


def family(sites: list[str], texts: dict[str, bytes], fresh: set[str]) -> Family:
    return Family([texts[site] for site in sites], list(sites), [s in fresh for s in sites])


def test_changes_applied_to_the_answer_before_give_the_families_back() -> None:
    sites = ["a", "b", "c", "d"]
    old = {site: f"old {site}\n".encode() for site in sites}
    last = Gathering(
        {
            "up": family(sites, old, set(sites)),
            "due": family(sites, old, set(sites)),
            "gone": family(sites, old, set(sites)),
        },
        (0, 1),
        4,
    )
    new = {**old, "b": b"new b\n", "e": b"new e\n"}
    now = Gathering(
        {
            "up": family(sites, new, {"b"}),  # one site written anew
            "due": family([*sites, "e"], new, {"e"}),  # a site more: sent whole
            "came": family(["a"], new, {"a"}),  # a family the last answer lacked
        },
        (1, 2),
        5,
    )
    change = changes(last, now, base=7)
    assert change.base == 7
    up = change.families["up"]
    assert isinstance(up, FamilyChanges) and up.places == [1] and up.pieces == [b"new b\n"]
    assert change.families["due"] is now.families["due"]
    assert "gone" not in change.families
    back = applied(last, change)
    assert back == now
    assert back.families["up"].sites is last.families["up"].sites  # the marks held, as held
    assert last.families["up"].pieces[1] == b"old b\n"  # what was held is left as it was


def test_changes_to_a_family_not_held_are_refused() -> None:
    change = changes(
        Gathering({"up": Family([b"x\n"], ["a"], [True])}, (0, 1), 1),
        Gathering({"up": Family([b"x\n"], ["a"], [False])}, (1, 2), 1),
        base=3,
    )
    with pytest.raises(BaseMissingError, match="up"):
        applied(Gathering({}, (0, 1), 0), change)
