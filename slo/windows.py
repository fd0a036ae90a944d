"""The SRE workbook's multiwindow, multi-burn-rate alerts (chapter "Alerting on SLOs").

Each alert fires when the error ratio over a long window and over a short window (1/12 of
it, so that the alert resets soon after the burning stops) both exceed burn rate times budget. The
burn rate is the share of the whole window's budget the long window may consume, scaled by
how many long windows fit in the objective's window: 2 % of a 30-day budget in an hour is
0.02 * 720 = 14.4; the same 2 % of a 28-day budget in an hour is 0.02 * 672 = 13.44.

A burn rate is never below 1.1: 10 % of a 28-day budget in three days is 0.933, and a
threshold under the budget itself fires at the objective (a service that keeps its
promise); at exactly 1, the float rounding of a ratio of two rates at the objective
(1 late run in 100: 0.010000000000000009) crosses it too. 1.1 is "the budget would be
spent before the window ends, by a tenth", which neither rounding nor noise reaches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HOUR = 3600
DAY = 24 * HOUR
# Every window an SLI is recorded over, besides the objective's own.
RECORDED_WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
# The lowest burn rate an alert may use: above the budget itself (see above).
MINIMUM_BURN_RATE = 1.1


@dataclass(frozen=True)
class BurnWindow:
    severity: str  # page (critical) or ticket (warning)
    long: str
    short: str
    long_seconds: int
    budget_share: float  # of the whole window's budget, spent within the long window

    def exact_burn_rate(self, window_days: int) -> float:
        # The chart computes the same product in the same order (templates/_slo.tpl).
        return max(self.budget_share * (window_days * DAY) / self.long_seconds, MINIMUM_BURN_RATE)

    def burn_rate(self, window_days: int) -> float:
        return round(self.exact_burn_rate(window_days), 6)

    def runs_needed(self, window_days: int, budget: float, minimum_runs: int) -> int:
        """The runs the long window must hold before the alert may fire: enough that one
        bad run cannot cross the threshold alone (1 / (burn rate * budget)), and never
        fewer than the objectives' minimumRuns."""
        single = math.ceil(round(1 / (self.exact_burn_rate(window_days) * budget), 6))
        return max(minimum_runs, single)


BURN_WINDOWS = (
    BurnWindow("page", "1h", "5m", HOUR, 0.02),
    BurnWindow("page", "6h", "30m", 6 * HOUR, 0.05),
    BurnWindow("ticket", "1d", "2h", DAY, 0.10),
    BurnWindow("ticket", "3d", "6h", 3 * DAY, 0.10),
)
SEVERITY = {"page": "critical", "ticket": "warning"}
