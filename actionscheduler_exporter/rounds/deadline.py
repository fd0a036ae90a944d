"""The deadline of a shared round: the latest deadline of the scrapes waiting for it.

A round is shared by every scrape that arrives while it runs. If it kept the deadline of
the scrape that started it, one scrape with a tiny timeout (a misconfigured client, a
probe) would cut the round short for every other scrape; so each scrape that joins moves
the deadline to its own when that is later.
"""

from __future__ import annotations

import threading


class Deadline:
    def __init__(self, at: float) -> None:
        self._at = at
        self._lock = threading.Lock()

    @property
    def at(self) -> float:
        with self._lock:
            return self._at

    def extend(self, at: float) -> None:
        with self._lock:
            self._at = max(self._at, at)
