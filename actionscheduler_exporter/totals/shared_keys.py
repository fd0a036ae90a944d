"""One copy of each key the heavy tier's ledgers count by, shared by every ledger."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SharedKeys:
    """One copy of each (status, group) key and hook name for every ledger's chunks: a
    fleet's stores mostly have the same statuses, group ids and hooks (a thousand stores'
    ledgers, each with its own copies, held 4.9 MiB of them). Bounded, as group ids and
    hook names are data: past `MAX_SHARED_KEYS` a key is used as read."""

    pairs: dict[tuple[str, int | None], tuple[str, int | None]] = field(default_factory=dict)
    hooks: dict[str, str] = field(default_factory=dict)

    def pair(self, status: str, group: int | None) -> tuple[str, int | None]:
        key = (status, group)
        if len(self.pairs) < MAX_SHARED_KEYS:
            return self.pairs.setdefault(key, key)
        return self.pairs.get(key, key)

    def hook(self, hook: str) -> str:
        if len(self.hooks) < MAX_SHARED_KEYS:
            return self.hooks.setdefault(hook, hook)
        return self.hooks.get(hook, hook)


MAX_SHARED_KEYS = 100_000
SHARED_KEYS = SharedKeys()
