"""In-round sources read at most every N seconds: the last reading served in between.

A source whose freshness is `Freshness(interval, in_round=True)` runs in the round, like
every hot collector, but is read again only when its interval has passed for that table
prefix (each prefix at its own point of the interval, 0.75 to 1.25 times it, so that a
network's subsites do not all refresh in one scrape), or when the source says its last
reading may not be served (`Source.cacheable`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable

from actionscheduler_exporter.sources.source import Reading
from actionscheduler_exporter.timing import Clock


class CachedReadings:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], tuple[float, Reading]] = {}
        # The prefixes of the last `retain`; None: the next one looks at every reading.
        self._retained: frozenset[str] | None = None

    def get(self, prefix: str, source: str) -> Reading | None:
        """The kept reading, while its interval has not passed."""
        with self._lock:
            kept = self._kept.get((prefix, source))
        if kept is None or self._clock() >= kept[0]:
            return None
        return kept[1]

    def last(self, prefix: str, source: str) -> Reading | None:
        """The kept reading, whether or not its interval has passed (to be renewed:
        `Collector.renewed`)."""
        with self._lock:
            kept = self._kept.get((prefix, source))
        return None if kept is None else kept[1]

    def keep(self, site: str, prefix: str, source: str, interval: float, reading: Reading) -> None:
        due = self._clock() + interval * stagger(site, prefix, source)
        with self._lock:
            self._kept[(prefix, source)] = (due, reading)
            if self._retained is not None and prefix not in self._retained:
                self._retained = None

    def drop(self, prefix: str, source: str) -> None:
        with self._lock:
            self._kept.pop((prefix, source), None)

    def retain(self, prefixes: Iterable[str]) -> None:
        """Forgets the prefixes that are gone (a subsite deleted); asked every round, and
        looks only when the prefixes changed."""
        wanted = frozenset(prefixes)
        with self._lock:
            if wanted == self._retained:
                return
            self._retained = wanted
            self._kept = {key: kept for key, kept in self._kept.items() if key[0] in wanted}


def stagger(*key: str) -> float:
    """A fixed factor from 0.75 to 1.25 per key: refreshes drift apart over time."""
    digest = hashlib.sha256("\0".join(key).encode()).digest()
    return 0.75 + 0.5 * int.from_bytes(digest[:4], "big") / 2**32
