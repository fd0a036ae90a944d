"""How a scrape's time is spent: one object, from the scraper's timeout down to the round.

Prometheus sends its scrape timeout (`X-Prometheus-Scrape-Timeout-Seconds`); everything
the exporter waits for is a share of it, decided here and nowhere else:

- the answer is due a little before the scraper gives up (`answer_by`), so that it arrives;
- the rounds are waited for until `rounds_wait`, keeping `WRITE_SHARE` of the time to
  write the answer (a thousand sites' samples take a few hundred milliseconds), and
  the helper processes' families (`split`) until half of that share has passed;
- listing the databases of a `database: auto` entry may take half of the answer's time;
- a round runs for at least `MIN_ROUND_SECONDS`, whatever the timeout of the scrape that
  starts it (a scrape with a tiny timeout gets what is read by then, and does not cut the
  round short for the scrapes that join it);
- inside the round, a site's first heavy refresh is waited for with half of what the
  round has left, and not when it is queued behind more sites' refreshes than the
  server has connections (`sources.heavy_tier`).

The shares are seconds after the scrape's start; `start(clock)` turns them into the
absolute deadlines (`timing.Deadline`) that everything below waits on.
`ScrapeBudget(10).plan()` lists the shares, for the docs and the tests.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from actionscheduler_exporter.timing import Clock, Deadline

DEFAULT_SCRAPE_TIMEOUT = 10.0
# A header beyond this is a misconfiguration: served as this (Prometheus' own limit for a
# scrape is its interval, minutes at most).
MAX_SCRAPE_TIMEOUT = 600.0
# Time for the answer to reach the scraper before its own timeout fires.
NETWORK_MARGIN = 0.5
# The share of the answer's time kept for writing it after the rounds.
WRITE_SHARE = 0.1
MIN_ROUND_SECONDS = DEFAULT_SCRAPE_TIMEOUT - NETWORK_MARGIN


class BudgetError(ValueError):
    """A scrape timeout that is not a positive number of seconds."""


@dataclass(frozen=True)
class ScrapeBudget:
    timeout: float = DEFAULT_SCRAPE_TIMEOUT  # seconds the scraper waits for the answer

    def __post_init__(self) -> None:
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise BudgetError(f"a scrape timeout must be a positive number, got {self.timeout}")

    @classmethod
    def from_header(cls, header: str | None) -> ScrapeBudget:
        """From the scraper's header (absent: the default); BudgetError names the problem."""
        if header is None:
            return cls()
        try:
            seconds = float(header)
        except ValueError:
            raise BudgetError(f"must be a number of seconds, got {header[:40]!r}") from None
        if math.isnan(seconds) or seconds <= 0:
            raise BudgetError(f"must be positive, got {header[:40]!r}")
        return cls(min(seconds, MAX_SCRAPE_TIMEOUT))

    @property
    def answer_by(self) -> float:
        """Seconds after the scrape's start by which the answer is sent."""
        return max(self.timeout - NETWORK_MARGIN, self.timeout / 2)

    @property
    def rounds_wait(self) -> float:
        """Seconds after the scrape's start until which the rounds are waited for."""
        return self.answer_by * (1 - WRITE_SHARE)

    @property
    def helpers_wait(self) -> float:
        """Seconds after the scrape's start until which the helper processes' answers
        are waited for (`split`): their rounds end with this process's, then they write
        and send their families; half of the writing share is theirs."""
        return self.rounds_wait + (self.answer_by - self.rounds_wait) / 2

    @property
    def discovery_wait(self) -> float:
        """The longest wait for a first listing of a `database: auto` entry's databases."""
        return self.answer_by / 2

    @property
    def round_runs_for(self) -> float:
        """Seconds a round started (or joined) by this scrape may run."""
        return max(self.answer_by, MIN_ROUND_SECONDS)

    def start(self, clock: Clock) -> ScrapeDeadlines:
        """The deadlines of a scrape that starts now on `clock`."""
        started = clock()
        return ScrapeDeadlines(
            started,
            Deadline(started + self.answer_by, clock),
            Deadline(started + self.rounds_wait, clock),
            Deadline(started + self.discovery_wait, clock),
            started + self.round_runs_for,
        )

    def plan(self) -> dict[str, float]:
        """The shares of this budget, in seconds from the scrape's start."""
        return {
            "timeout": self.timeout,
            "answer_by": self.answer_by,
            "rounds_wait": self.rounds_wait,
            "writing": self.answer_by - self.rounds_wait,
            "helpers_wait": self.helpers_wait,
            "discovery_wait": self.discovery_wait,
            "round_runs_for": self.round_runs_for,
        }


@dataclass(frozen=True)
class ScrapeDeadlines:
    """One scrape's shares of its budget, as absolute times on the exporter's clock."""

    started: float
    answer: Deadline  # the answer is sent by then
    rounds: Deadline  # the rounds are waited for until then
    discovery: Deadline  # a first listing of a `database: auto` entry, waited for until then
    round_runs_until: float  # the latest clock time a round this scrape joins may run to


def after_scrapes_in_flight(close: Callable[[], None]) -> None:
    """Calls `close` on a timer of its own once the scrapes that may still use what it
    closes have answered (twice the default timeout: a replaced coordinator, helpers)."""
    timer = threading.Timer(2 * DEFAULT_SCRAPE_TIMEOUT, close)
    timer.daemon = True
    timer.start()
