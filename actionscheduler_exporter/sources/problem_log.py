"""The exporter's log of problems: each logged when it starts and when it ends, not on every
scrape, and a thousand sites' changes of one kind in one line.

An agency's exporter reads hundreds of sites: when their server restarts, each goes down
and comes back in the same scrape. A line per site would bury the log; so changes are
kept until the end of the scrape (`flush`) and those that differ only by site are
written once, with `sites` (how many), `site` (the first few names) and `more`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from actionscheduler_exporter.logs import emit

log = logging.getLogger(__name__)

# Site names written in a summarised line; the rest are counted.
NAMES_SHOWN = 5


@dataclass(frozen=True)
class LogLine:
    """A constant message and its fields; `site` is the one a summary gathers."""

    message: str
    site: str = ""
    fields: tuple[tuple[str, object], ...] = field(default=())

    @classmethod
    def of(cls, message: str, site: str = "", **fields: object) -> LogLine:
        return cls(message, site, tuple(fields.items()))


@dataclass(frozen=True)
class _Change:
    level: int
    line: LogLine


class ProblemLog:
    def __init__(self, *, buffered: bool = False) -> None:
        """`buffered`: keep changes until `flush` (the coordinator flushes after each
        scrape); otherwise each is written at once (one site's round on its own)."""
        self._buffered = buffered
        self._current: dict[str, LogLine | None] = {}
        self._pending: list[_Change] = []
        self._lock = threading.Lock()
        # The sites (`LogLine.site`) with a problem now, and how many keys each has: a
        # reading of a site that has none clears nothing (every reading of every source
        # clears its key).
        self.open_sites: dict[str, int] = {}

    def set(self, key: str, problem: LogLine | None, *, recovered: LogLine | None = None) -> None:
        """The problem of `key` now (None: none); written only when it changes. The
        end of a problem is written as `recovered` (by default "recovered" with the key)."""
        with self._lock:
            previous = self._current.get(key)
            if problem == previous:
                return
            self._current[key] = problem
            if previous is not None:
                self._count(previous.site, -1)
            if problem is not None:
                self._count(problem.site, 1)
                change = _Change(logging.WARNING, problem)
            else:
                change = _Change(logging.INFO, recovered or LogLine.of("recovered", key=key))
            if self._buffered:
                self._pending.append(change)
                return
        _write(change.level, change.line, [change.line.site] if change.line.site else [])

    def _count(self, site: str, change: int) -> None:
        """Under the lock."""
        count = self.open_sites.get(site, 0) + change
        if count:
            self.open_sites[site] = count
        else:
            del self.open_sites[site]

    def clear(self, key: str, recovered: Callable[[], LogLine]) -> None:
        """No problem of `key` now; `recovered` makes the line that says so, when there
        was one (made only then: every reading of every source clears its key)."""
        if self._current.get(key) is None:  # a dict read is atomic; the rest holds the lock
            return
        self.set(key, None, recovered=recovered())

    def flush(self) -> None:
        """Writes the kept changes: one line for those that differ only by site."""
        with self._lock:
            pending, self._pending = self._pending, []
        groups: dict[tuple[int, str, tuple[tuple[str, object], ...]], list[str]] = {}
        for change in pending:
            line = change.line
            shape = (change.level, line.message, line.fields)
            groups.setdefault(shape, []).append(line.site)
        for (level, message, fields), sites in groups.items():
            named = [site for site in sites if site]
            if len(named) < len(sites):  # lines without a site: as many as came
                for _ in range(len(sites) - len(named)):
                    _write(level, LogLine(message, "", fields), [])
            if named:
                _write(level, LogLine(message, "", fields), named)


def _write(level: int, line: LogLine, sites: list[str]) -> None:
    extra: dict[str, object] = {}
    if len(sites) == 1:
        extra["site"] = sites[0]
    elif sites:
        extra["sites"] = len(sites)
        extra["site"] = sites[:NAMES_SHOWN]
        if len(sites) > NAMES_SHOWN:
            extra["more"] = len(sites) - NAMES_SHOWN
    emit(log, level, line.message, **extra, **dict(line.fields))
