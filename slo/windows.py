"""The SRE workbook's multiwindow, multi-burn-rate alerts (chapter "Alerting on SLOs").

Each alert fires when the error ratio over a long window and over a short window (1/12 of
it, so that the alert resets soon after the burning stops) both exceed burn rate times budget. The
burn rate is the share of the whole window's budget the long window may consume, scaled by
how many long windows fit in the objective's window: 2 % of a 30-day budget in an hour is
0.02 * 720 = 14.4; the same 2 % of a 28-day budget in an hour is 0.02 * 672 = 13.44.
"""

from __future__ import annotations

from dataclasses import dataclass

HOUR = 3600
DAY = 24 * HOUR
# Every window an SLI is recorded over, besides the objective's own.
RECORDED_WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")


@dataclass(frozen=True)
class BurnWindow:
    severity: str  # page (critical) or ticket (warning)
    long: str
    short: str
    long_seconds: int
    budget_share: float  # of the whole window's budget, spent within the long window

    def burn_rate(self, window_days: int) -> float:
        return round(self.budget_share * window_days * DAY / self.long_seconds, 6)


BURN_WINDOWS = (
    BurnWindow("page", "1h", "5m", HOUR, 0.02),
    BurnWindow("page", "6h", "30m", 6 * HOUR, 0.05),
    BurnWindow("ticket", "1d", "2h", DAY, 0.10),
    BurnWindow("ticket", "3d", "6h", 3 * DAY, 0.10),
)
SEVERITY = {"page": "critical", "ticket": "warning"}
