"""The per-site error counter: the only state that lives across scrapes."""

from __future__ import annotations

import threading
from collections import Counter

from exporter import catalog
from exporter.collectors.base import Sample, sample


class ErrorCounts:
    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, site: str, kind: str) -> None:
        with self._lock:
            self._counts[(site, kind)] += 1

    def samples(self, site: str) -> list[Sample]:
        with self._lock:
            return [
                sample(catalog.ERRORS, self._counts[(site, kind)], kind=kind)
                for kind in catalog.ERROR_KINDS
            ]
