"""Where the rounds' CPU goes, part by part: each part of a round (`PARTS`) timed by the
CPU clock of the thread that runs it, over the timed scrapes of `bench.phases --parts`.

A sampling profiler gives shares, and a deterministic one slows each call by its own
cost; this times only the dozen calls below, each around the whole of its work. Their
times run high, most where the calls are many and small (the rounds took 198 ms with it,
about 170 without: each timed call reads the thread's clock twice and takes a lock). A
part is counted only inside the part it is shown under (the collectors' readings of the
heavy tier's refreshes, say, are not a round's), and in that part's time too. A
network's subsites (`--setup subsites`) are read on other threads than their round's:
not timed here. "A connection borrowed" is `Session.open` at a round's start; a round
whose store was answered in another round's batch borrows later, if at all (for a
collector's own statement, or a batch it sends), in the part it does it in.

Timing wraps the classes' methods while `RoundParts` is entered (enter it before the
coordinator is made: its rounds keep the methods they were made with): for the
benchmark only.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from types import TracebackType
from typing import Any

from actionscheduler_exporter.db.pool import ServerPool
from actionscheduler_exporter.db.read_ahead import ReadAhead
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.rounds.collectors_loop import CollectorsLoop
from actionscheduler_exporter.rounds.database_round import DatabaseRound
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.sources.heavy_tier import HeavyTier
from actionscheduler_exporter.sources.reader import SourceReader
from bench.measure import ms

# (class, method, part, the part it is called in): in the order the table shows them.
PARTS: tuple[tuple[type, str, str, str], ...] = (
    (MonitoredSite, "run", "a site's round", ""),
    (DatabaseRound, "_hot_statement", "the hot statement", "a site's round"),
    (ReadAhead, "query", "its read-ahead", "the hot statement"),
    (ReadAhead, "_read", "its batches (made, sent, parsed, split)", "its read-ahead"),
    (CollectorsLoop, "read", "the collectors' loop", "a site's round"),
    (SourceReader, "read", "the collectors' readings", "the collectors' loop"),
    (SourceReader, "report", "their reports", "the collectors' loop"),
    (HeavyTier, "samples", "the heavy tier's samples", "a site's round"),
    (Session, "open", "a connection borrowed", "a site's round"),
    (Session, "release", "a connection given back", "a site's round"),
    (ServerPool, "acquire", "the pool's turn", "a connection borrowed"),
)


class RoundParts:
    """While entered, times each of `PARTS` by the CPU clock of its thread."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()
        self._inside = threading.local()  # the parts each thread is in
        self._originals: list[tuple[type, str, Callable[..., Any]]] = []
        self.scrapes = 0

    def __enter__(self) -> RoundParts:
        for owner, name, part, caller in PARTS:
            original = getattr(owner, name)
            self._originals.append((owner, name, original))
            setattr(owner, name, self._timed(original, part, caller))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()

    def reset(self) -> None:
        """Counts from now on (after the scrapes that warm up)."""
        with self._lock:
            self._seconds.clear()

    def _timed(self, original: Callable[..., Any], part: str, caller: str) -> Callable[..., Any]:
        seconds, lock, clock, inside = self._seconds, self._lock, time.thread_time, self._inside

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            parts: set[str] = inside.__dict__.setdefault("parts", set())
            if (caller and caller not in parts) or part in parts:
                return original(*args, **kwargs)
            parts.add(part)
            started = clock()
            try:
                return original(*args, **kwargs)
            finally:
                spent = clock() - started
                parts.discard(part)
                with lock:
                    seconds[part] += spent

        return timed

    def table(self) -> list[str]:
        """Each part's CPU per scrape, and the part it is counted in."""
        lines = ["| part | within | CPU per scrape |", "| --- | --- | --- |"]
        for _, _, part, caller in PARTS:
            spent = self._seconds.get(part, 0.0) / max(1, self.scrapes)
            lines.append(f"| {part} | {caller or 'the rounds'} | {ms(spent)} |")
        return lines
