"""The exporter's one vocabulary of time: a `Clock`, and a `Deadline` on it.

Every wait below the scrape takes a `Deadline` (an absolute time on the injected clock)
and asks it what is `left()`; only the scrape's budget (`scrape.budget`) turns the
scraper's timeout into deadlines. A parameter that means "seconds to wait" is named
`wait_seconds`.

A round is shared by every scrape that arrives while it runs. If it kept the deadline of
the scrape that started it, one scrape with a tiny timeout (a misconfigured client, a
probe) would cut the round short for every other scrape; so each scrape that joins moves
the round's deadline to its own when that is later (`extend`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

# Seconds on a monotonic clock; tests pass one they move by hand.
Clock = Callable[[], float]


class Deadline:
    def __init__(self, at: float, clock: Clock) -> None:
        self._at = at
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def at(self) -> float:
        """The clock time of the deadline. Read without the lock: reading an attribute is
        atomic, and only `extend`'s read-then-write needs it (asked several times per
        store and round)."""
        return self._at

    def left(self) -> float:
        """Seconds until the deadline (0 once it has passed)."""
        return max(0.0, self.at - self._clock())

    def passed(self) -> bool:
        return self._clock() > self._at  # asked per collector of every store's round

    def extend(self, at: float) -> None:
        """Moves the deadline to `at` when that is later."""
        with self._lock:
            self._at = max(self._at, at)
