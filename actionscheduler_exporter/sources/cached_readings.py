"""In-round sources' readings kept between rounds, and served in a later one.

A source whose freshness is `Freshness(interval, in_round=True)` runs in the round, like
every hot collector, but is read again only when its interval has passed for that table
prefix (each prefix at its own point of the interval, 0.75 to 1.25 times it, so that a
network's subsites do not all refresh in one scrape), or when the source says its last
reading may not be served (`Source.cacheable`): `CachedReadings`.

A hot collector whose samples follow from its columns' values alone
(`Collector.same_samples_for`) makes the same samples of the same values. Most stores of
a fleet are quiet, and from one round to the next most of their columns answer the same
(no action running, no claim): the round then serves the reading of the last time those
values came, and the samples reported of it, instead of making them again:
`RepeatedReadings`. They are the same objects, which the writer finds unchanged at a
glance (`exposition.writer`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from typing import Generic, TypeVar

from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.sources.source import Reading
from actionscheduler_exporter.timing import Clock

Kept = TypeVar("Kept")


class _ByPrefix(Generic[Kept]):
    """What is kept per table prefix and source, changed under a lock: a network's
    subsites are read by several threads, and a round that ran past its deadline may
    still keep something while the next one starts. Read without it: a dictionary's
    look-up is atomic, and `retain` replaces the dictionary whole (every collector of
    every store's round reads here)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], Kept] = {}
        # The prefixes of the last `retain`; None: the next one looks at every entry.
        self._retained: frozenset[str] | None = None

    def _get(self, prefix: str, source: str) -> Kept | None:
        return self._kept.get((prefix, source))

    def _put(self, prefix: str, source: str, kept: Kept) -> None:
        with self._lock:
            self._kept[(prefix, source)] = kept
            if self._retained is not None and prefix not in self._retained:
                self._retained = None  # a late round's: the next `retain` looks again

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


class CachedReadings(_ByPrefix[tuple[float, Reading]]):
    """Each cached source's last reading, and the clock time it is served until."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self._clock = clock

    def get(self, prefix: str, source: str) -> Reading | None:
        """The kept reading, while its interval has not passed."""
        kept = self._get(prefix, source)
        if kept is None or self._clock() >= kept[0]:
            return None
        return kept[1]

    def last(self, prefix: str, source: str) -> Reading | None:
        """The kept reading, whether or not its interval has passed (to be renewed:
        `Collector.renewed`)."""
        kept = self._get(prefix, source)
        return None if kept is None else kept[1]

    def keep(self, site: str, prefix: str, source: str, interval: float, reading: Reading) -> float:
        """Keeps the reading until its interval has passed since it was read (a reading
        made of a row read for it earlier, in another store's statement, is served for
        less: `db.refresh_together`); returns that clock time."""
        read_at = self._clock() if reading.read_at is None else reading.read_at
        due = read_at + interval * stagger(site, prefix, source)
        self._put(prefix, source, (due, reading))
        return due


class RepeatedReadings(_ByPrefix[tuple[Row, Reading, list[Sample]]]):
    """Each repeatable collector's last good reading, its reported samples and the
    values it was made of."""

    def get(self, prefix: str, source: str, values: Row) -> tuple[Reading, list[Sample]] | None:
        """The reading made of the same `values` last time, with its reported samples."""
        last = self._get(prefix, source)
        if last is None or last[0] != values:
            return None
        return last[1], last[2]

    def keep(
        self, prefix: str, source: str, values: Row, reading: Reading, reported: list[Sample]
    ) -> None:
        self._put(prefix, source, (values, reading, reported))


def stagger(*key: str) -> float:
    """A fixed factor from 0.75 to 1.25 per key: refreshes drift apart over time."""
    digest = hashlib.sha256("\0".join(key).encode()).digest()
    return 0.75 + 0.5 * int.from_bytes(digest[:4], "big") / 2**32
