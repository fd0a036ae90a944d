"""The exporter's log of problems: each logged when it starts and when it ends, not on every
scrape, and a thousand sites' changes of one kind in one line.

An agency's exporter reads hundreds of sites: when their server restarts, each goes down
and comes back in the same scrape. A line per site would bury the log; so changes are
kept until the end of the scrape (`flush`) and those that differ only by site are
written once, with how many sites and the first few names.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Site names written in a summarised line; the rest are counted.
NAMES_SHOWN = 5


@dataclass(frozen=True)
class _Change:
    level: int
    message: str
    site: str


class ProblemLog:
    def __init__(self, *, buffered: bool = False) -> None:
        """`buffered`: keep changes until `flush` (the coordinator flushes after each
        scrape); otherwise each is written at once (one site's round on its own)."""
        self._buffered = buffered
        self._current: dict[str, str] = {}
        self._pending: list[_Change] = []
        self._lock = threading.Lock()

    def set(self, key: str, problem: str, *, site: str = "", recovered: str = "") -> None:
        """The problem of `key` now (empty: none); written only when it changes. `site`:
        the label the message names as `site=<label>`, for summarising."""
        with self._lock:
            previous = self._current.get(key, "")
            if problem == previous:
                return
            self._current[key] = problem
            if problem:
                change = _Change(logging.WARNING, problem, site)
            else:
                change = _Change(logging.INFO, recovered or f"recovered {key}", site)
            if self._buffered:
                self._pending.append(change)
                return
        log.log(change.level, change.message)

    def flush(self) -> None:
        """Writes the kept changes: one line for those that differ only by site."""
        with self._lock:
            pending, self._pending = self._pending, []
        groups: dict[tuple[int, str], list[str]] = {}
        for change in pending:
            token = f"site={change.site}"
            if change.site and token in change.message:
                shape = change.message.replace(token, "site=\0", 1)
            else:
                shape = change.message
            groups.setdefault((change.level, shape), []).append(change.site)
        for (level, shape), sites in groups.items():
            if "\0" not in shape:
                for _ in sites:
                    log.log(level, shape)
                continue
            if len(sites) == 1:
                log.log(level, shape.replace("\0", sites[0]))
                continue
            shown = ", ".join(sites[:NAMES_SHOWN])
            more = f" and {len(sites) - NAMES_SHOWN} more" if len(sites) > NAMES_SHOWN else ""
            log.log(level, shape.replace("site=\0", f"sites={len(sites)} [{shown}{more}]"))
