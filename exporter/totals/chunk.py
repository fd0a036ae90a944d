"""What one range of action ids holds, as counted by one bounded statement.

The heavy tier's totals are sums over chunks: contiguous ranges of `action_id` that tile
the id space. A chunk is recounted by reading its rows (one primary-key range), or, when
nothing in it can have changed but deletions, checked by counting its rows per group on
the `group_id` index alone (index-only, a fifth of the cost): see `ledger.py` for when.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Statuses Action Scheduler never changes again: rows in them can only be deleted.
FINISHED = ("complete", "failed", "canceled")
# Open rows per chunk whose status is remembered, so that a chunk holding a few pending
# actions (future renewals among old history) is checked by id instead of recounted.
MAX_OPEN_ROWS = 1000
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
    rows_by_group: Counter[int | None] = field(default_factory=Counter)
    # Status of every open (not finished) row, or None when there are too many to check.
    open_rows: dict[int, str] | None = field(default_factory=dict)
    # The highest action id that existed one refresh before this chunk was counted: when
    # the chunk ends at or below it, every id in it had been handed out for a refresh
    # interval, and no late-committing insert is expected any more.
    basis: int = -1
    counted: bool = False

    @property
    def rows(self) -> int:
        return sum(self.rows_by_group.values())

    @property
    def checkable(self) -> bool:
        """True when only deletions can have changed it, and they can be seen cheaply."""
        return (
            self.counted
            and self.end <= self.basis
            and self.open_rows is not None
            and None not in self.rows_by_group
            and len(self.rows_by_group) <= MAX_CHECKED_GROUPS
        )

    def reset(self) -> None:
        self.by_status_group = Counter()
        self.failed_by_hook = Counter()
        self.oldest_finished = None
        self.rows_by_group = Counter()
        self.open_rows = {}
        self.counted = False
