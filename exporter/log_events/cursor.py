"""Where the log events collector has read up to, safe against ids that commit out of order.

Auto-increment ids are handed out at INSERT and become visible at COMMIT, so row 101 can
be readable before row 100. The cursor therefore stops below a missing id for a grace
period; rows read beyond it are remembered so that they are never counted twice. A gap
that stays empty longer than the grace period (a rolled-back insert, a deleted row, an
auto_increment_increment above 1) is given up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Gaps tracked at the most; beyond it the oldest are given up (a huge id jump).
MAX_GAPS = 10_000


@dataclass
class LogCursor:
    position: int
    grace_seconds: float = 30.0
    _read_above: set[int] = field(default_factory=set)
    _gaps: dict[int, float] = field(default_factory=dict)

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
        given_up = 0
        consumed_ids = self._read_above.union(read_ids)
        consumed = sorted(consumed_ids)
        previous = self.position
        for log_id in consumed:
            for missing in range(previous + 1, min(log_id, previous + 1 + MAX_GAPS)):
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
        self.position = min(self._gaps) - 1 if self._gaps else highest
        self._read_above = {log_id for log_id in consumed if log_id > self.position}
        return given_up
