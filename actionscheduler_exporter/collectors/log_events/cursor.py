"""Where the log events collector has read up to, safe against ids that commit out of order.

Auto-increment ids are handed out at INSERT and become visible at COMMIT, so row 101 can
be readable before row 100. The cursor therefore stops below a missing id for a grace
period; rows read beyond it are remembered so that they are never counted twice. A gap
that stays empty longer than the grace period (a rolled-back insert, a deleted row) is
given up.

With `auto_increment_increment` above 1 (Galera sets it to the cluster's size) ids come
`stride` apart: only the ids of that lattice are waited for. The stride starts at the
server's increment and narrows to the greatest common divisor of the steps seen, so ids
from several writers (several offsets) are all waited for again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Gaps tracked at the most; beyond it the oldest are given up (a huge id jump).
MAX_GAPS = 10_000


@dataclass
class LogCursor:
    position: int
    grace_seconds: float = 30.0
    stride: int = 1
    _read_above: set[int] = field(default_factory=set)
    _gaps: dict[int, float] = field(default_factory=dict)

    def unread(self, newest: int) -> int:
        """Ids up to `newest` not read yet: the lag (those read beyond a gap left out)."""
        expected = max(0, newest - self.position) // max(1, self.stride)
        if not self._read_above:  # a quiet store's, at every round
            return expected
        return max(0, expected - len([i for i in self._read_above if i <= newest]))

    def is_new(self, log_id: int) -> bool:
        return log_id > self.position and log_id not in self._read_above

    def restart(self) -> None:
        """The table was truncated or re-created: read it again from the beginning."""
        self.position = 0
        self._read_above.clear()
        self._gaps.clear()

    def advance(self, read_ids: list[int], now: float) -> int:
        """Records the ids a scrape read (in ascending order) and moves the cursor; returns
        how many missing ids it gave up (their grace passed with no row to read)."""
        if not (read_ids or self._read_above or self._gaps):
            return 0  # nothing read, nothing waited for: a quiet store's, at every round
        given_up = 0
        consumed_ids = self._read_above.union(read_ids)
        consumed = sorted(consumed_ids)
        previous = self.position
        for log_id in consumed:
            if previous:  # the steps between ids narrow the stride (several writers)
                self.stride = math.gcd(self.stride, log_id - previous) or 1
            previous = log_id
        previous = self.position
        step = max(1, self.stride)
        for log_id in consumed:
            for missing in range(previous + step, min(log_id, previous + step * MAX_GAPS), step):
                self._gaps.setdefault(missing, now)
            previous = log_id
        for missing, since in list(self._gaps.items()):
            if missing in consumed_ids:
                del self._gaps[missing]
            elif now - since > self.grace_seconds:
                del self._gaps[missing]
                given_up += 1
        if len(self._gaps) > MAX_GAPS:
            for missing in sorted(self._gaps)[: len(self._gaps) - MAX_GAPS]:
                del self._gaps[missing]
        highest = consumed[-1] if consumed else self.position
        self.position = min(self._gaps) - step if self._gaps else highest
        self._read_above = {log_id for log_id in consumed if log_id > self.position}
        return given_up
