"""What one range of action ids holds, as counted by one bounded statement.

The heavy tier's totals are sums over chunks: contiguous ranges of `action_id` that tile
the id space, each ending on a multiple of the chunk size. A chunk is recounted by reading
its rows (one primary-key range), or checked without reading them: see `ledger.py`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Statuses Action Scheduler never changes again: rows in them can only be deleted.
FINISHED = ("complete", "failed", "canceled")
# Distinct groups per chunk up to which the group-index check is used.
MAX_CHECKED_GROUPS = 200


@dataclass
class Chunk:
    start: int
    end: int  # inclusive
    by_status_group: Counter[tuple[str, int | None]] = field(default_factory=Counter)
    failed_by_hook: Counter[str] = field(default_factory=Counter)
    # Seconds from 2000-01-01 to the oldest complete or canceled action's last attempt.
    oldest_finished: int | None = None
    rows: int = 0
    # Open (not finished) rows by status: pending, in-progress, or an unknown status.
    open_by_status: Counter[str] = field(default_factory=Counter)
    # The highest action id that existed one refresh before this chunk was counted: when
    # the chunk ends at or below it, every id in it had been handed out for a refresh
    # interval, and no late-committing insert is expected any more.
    basis: int = -1
    counted: bool = False

    @property
    def groups(self) -> set[int | None]:
        return {group for _, group in self.by_status_group}

    @property
    def settled(self) -> bool:
        """Only finished actions: nothing but a deletion can change it."""
        return self.checkable and not self.open_by_status

    @property
    def checkable(self) -> bool:
        """True when no insert can still arrive in it, and its rows all have a group."""
        return (
            self.counted
            and self.end <= self.basis
            and None not in (groups := self.groups)
            and len(groups) <= MAX_CHECKED_GROUPS
        )
