"""What a log row records, read from its place in its action's log instead of its words.

Sites in another language write translated messages, but Action Scheduler leaves the
runner's context untranslated at the end of "action started via %s" (and "action complete
via %s"), and it writes an action's rows in a fixed order:

    created, [reset…], started via RUNNER, end, [stop]

where the end is "complete via RUNNER" or a failure, and the stop ("consistently failing",
or "failure scheduling the next instance") follows the end of a recurring action only.
So the first row that ends with a runner's context is the start, the row after it the end
(its kind is the action's status), and a row after the end of a recurring action is a stop.
A start whose context is not one Action Scheduler ships (a plugin's own) is recognised by
the words before a known context, learned from the site's own starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from actionscheduler_exporter.collectors.log_events.classify import Event, Kind
from actionscheduler_exporter.metrics.catalog import RUNNERS

_END_BY_STATUS = {
    "complete": Event(Kind.COMPLETED),
    "failed": Event(Kind.FAILED, "unknown"),
}
# The event of an action's latest row before any start, from the action's status.
_LATEST_BY_STATUS = {
    **_END_BY_STATUS,
    "canceled": Event(Kind.CANCELED),
    "in-progress": Event(Kind.STARTED),
}
_STARTED_STATUSES = ("in-progress", "complete", "failed")
# Languages a site's starts are learned in: a site switches language rarely.
MAX_TEMPLATES = 4


@dataclass(frozen=True)
class LoggedRow:
    log_id: int
    message: str


class RunnerContexts:
    """Which runner a message names at its end: one of Action Scheduler's contexts, or any
    context after the words this site's starts were seen to begin with."""

    def __init__(self) -> None:
        self._start_words: list[str] = []

    def known(self, message: str) -> str | None:
        for context in RUNNERS:
            if message.endswith(context) and message[: -len(context)].endswith(" "):
                return context
        return None

    def runner_of(self, message: str) -> str | None:
        known = self.known(message)
        if known is not None:
            return known
        for words in self._start_words:
            if message.startswith(words) and len(message) > len(words):
                return message[len(words) :]
        return None

    def learn(self, start_message: str, context: str) -> bool:
        """Remembers the words before a known context; True when they are new."""
        words = start_message[: -len(context)]
        if words in self._start_words or len(self._start_words) >= MAX_TEMPLATES:
            return False
        self._start_words.append(words)
        return True


def events_by_place(
    rows: Sequence[LoggedRow], status: str, recurring: bool, contexts: RunnerContexts
) -> tuple[dict[int, Event], bool]:
    """The event of each of an action's rows (all of them, in log order) that its place
    tells, and whether a start taught `contexts` new words."""
    events: dict[int, Event] = {}
    learned = False
    phase = "before"
    for index, row in enumerate(rows):
        runner = contexts.runner_of(row.message)
        if phase == "before":
            # Only a run makes an action in progress, complete or failed; a pending or
            # canceled one never started ("action ignored via …" ends with a context too).
            if runner is not None and status in _STARTED_STATUSES:
                events[row.log_id] = Event(Kind.STARTED, runner=runner)
                known = contexts.known(row.message)
                learned = (known is not None and contexts.learn(row.message, known)) or learned
                phase = "running"
            elif index == len(rows) - 1 and status in _LATEST_BY_STATUS:
                events[row.log_id] = _LATEST_BY_STATUS[status]
        elif phase == "running":
            if status in _END_BY_STATUS:
                events[row.log_id] = _END_BY_STATUS[status]
            phase = "ended"
        elif runner is None and recurring:  # "action ignored via …" ends with a context
            events[row.log_id] = Event(Kind.STOPPED, "unknown")
    return events, learned
