"""Python calls per store and scrape, phase by phase: a count that a noisy machine does
not move, where CPU seconds do (this machine's speed changed by half between two runs a
minute apart: docs/performance-sessions.md).

Every call of a Python function and every call into C (`sys.setprofile`'s "call" and
"c_call" events) is counted, in the scrape's own thread under the phase it is in, and in
every other thread (the rounds', the heavy tier's) under "the rounds". A count is not a
time: a call into C that gzips a part counts one, as a `len` does. It tells whether a
change does less of the rounds' and the writing's many small steps, which is where a
thousand stores' scrape spends its CPU (docs/performance.md, "Where it stands").

The profile hook slows the process several times: the CPU times of a run that counts are
not the code's. Enter `CallCounts` before the coordinator is made: the threads started
after it are counted (`threading.setprofile`).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from types import FrameType
from typing import Any

# The other threads' calls are counted under this phase.
OTHER_THREADS = "the rounds"


class CallCounts:
    """While entered, counts the calls of every thread, while `counting`."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.phase = ""  # the scrape thread's phase, set by its caller
        self.counting = False
        self._scrape_thread = threading.current_thread()

    def __enter__(self) -> CallCounts:
        threading.setprofile(self._event)
        sys.setprofile(self._event)
        return self

    def __exit__(self, *_: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)

    def _event(self, _frame: FrameType, event: str, _arg: Any) -> None:
        if self.counting and (event == "call" or event == "c_call"):
            own = threading.current_thread() is self._scrape_thread
            self.counts[self.phase if own else OTHER_THREADS] += 1

    def table(self, phases: tuple[str, ...], stores: int, scrapes: int) -> list[str]:
        """Each phase's calls per store and scrape, and all of them."""
        per = max(1, stores * scrapes)
        lines = ["| phase | calls per store |", "| --- | --- |"]
        lines += [f"| {phase} | {self.counts[phase] / per:.1f} |" for phase in phases]
        lines.append(f"| in all | {sum(self.counts.values()) / per:.1f} |")
        return lines
