"""Python calls per store and scrape, phase by phase: a count that a noisy machine does
not move, where CPU seconds do (this machine's speed changed by half between two runs a
minute apart: docs/performance-sessions.md).

Every call of a Python function and every call into C (`sys.setprofile`'s "call" and
"c_call" events) is counted, in the scrape's own thread under the phase it is in, and in
every other thread (the rounds', the heavy tier's) under "the rounds". A count is not a
time: a call into C that gzips a part counts one, as a `len` does. It tells whether a
change does less of the rounds' and the writing's many small steps, which is where a
thousand stores' scrape spends its CPU (docs/performance.md, "Where it stands").

With `by_function`, each phase's calls are also counted by the function called (its
module and qualified name; a C function's own, with the function that called it: a
`dict.get` counts for nothing without where), to show which steps a store's calls are.

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

    def __init__(self, *, by_function: bool = False) -> None:
        self.counts: Counter[str] = Counter()
        # By phase and function called, when `by_function`.
        self.functions: Counter[tuple[str, str]] | None = Counter() if by_function else None
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

    def _event(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.counting and (event == "call" or event == "c_call"):
            own = threading.current_thread() is self._scrape_thread
            phase = self.phase if own else OTHER_THREADS
            self.counts[phase] += 1
            if self.functions is not None:
                self.functions[phase, _called(frame, event, arg)] += 1

    def table(self, phases: tuple[str, ...], stores: int, scrapes: int) -> list[str]:
        """Each phase's calls per store and scrape, and all of them."""
        per = max(1, stores * scrapes)
        lines = ["| phase | calls per store |", "| --- | --- |"]
        lines += [f"| {phase} | {self.counts[phase] / per:.1f} |" for phase in phases]
        lines.append(f"| in all | {sum(self.counts.values()) / per:.1f} |")
        return lines

    def function_table(self, phase: str, stores: int, scrapes: int, most: int) -> list[str]:
        """The `most` functions called most in `phase`, with their calls per store and
        scrape (empty without `by_function`)."""
        if self.functions is None:
            return []
        per = max(1, stores * scrapes)
        found = Counter({name: n for (where, name), n in self.functions.items() if where == phase})
        lines = [f"| {phase}: function called | calls per store |", "| --- | --- |"]
        lines += [f"| `{name}` | {n / per:.2f} |" for name, n in found.most_common(most)]
        return lines


def _called(frame: FrameType, event: str, arg: Any) -> str:
    """The function a "call" (its code's module and qualified name) or "c_call" (the C
    function's own, in the function that called it) event calls."""
    if event == "c_call":
        owner = getattr(arg, "__self__", None)
        name = getattr(arg, "__qualname__", repr(arg))  # a method's names its type
        if isinstance(owner, type(sys)):
            name = f"{owner.__name__}.{name}"
        return f"{name} (C) in {_function(frame)}"
    return _function(frame)


def _function(frame: FrameType) -> str:
    code = frame.f_code
    if code.co_filename == "<string>":  # a dataclass's generated method: name its class
        made_for = frame.f_locals.get("self")
        return f"{type(made_for).__qualname__}.{code.co_name} (generated)"
    module = code.co_filename.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}.{code.co_qualname}"
