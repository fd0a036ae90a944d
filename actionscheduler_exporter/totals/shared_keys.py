"""One copy of each key the heavy tier's ledgers count by, shared by every ledger."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")

# A fleet's stores mostly have the same statuses, group ids and hooks: a thousand stores'
# ledgers, each with its own copies, held 6.6 MiB of them. Shared up to this many of each
# (about a megabyte), which stay while the process lives; past it, each ledger keeps its
# own copies of the others, let go of with it.
MAX_SHARED_KEYS = 10_000
_PAIRS: dict[tuple[str, int | None], tuple[str, int | None]] = {}
_HOOKS: dict[str, str] = {}


class KeyCopies:
    """A ledger's copies of its (status, group) keys and hook names: the process's shared
    ones where there are, else its own (hundreds of chunks hold the same keys)."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[str, int | None], tuple[str, int | None]] = {}
        self._hooks: dict[str, str] = {}

    def pair(self, status: str, group: int | None) -> tuple[str, int | None]:
        key = (status, group)
        return _copy(_PAIRS, self._pairs, key)

    def hook(self, hook: str) -> str:
        return _copy(_HOOKS, self._hooks, hook)


def _copy(shared: dict[K, K], own: dict[K, K], key: K) -> K:
    found = shared.get(key)
    if found is not None:
        return found
    if len(shared) < MAX_SHARED_KEYS:
        return shared.setdefault(key, key)
    return own.setdefault(key, key)
