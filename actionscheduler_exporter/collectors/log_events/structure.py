"""What a log row records, read from its place in its action's log instead of its words.

Sites in another language write translated messages, but Action Scheduler leaves the
runner's context untranslated at the end of "action started via %s" (and "action complete
via %s"), and it writes an action's rows in a fixed order:

    created, [reset…], started via RUNNER, end, [stop]

where the end is "complete via RUNNER" or a failure, and the stop ("consistently failing",
or "failure scheduling the next instance") follows the end of a recurring action only.
So the first row that ends with a runner's context is the start, the row after it the end
(its kind is the action's status), and the first row after the end of a recurring action
is a stop, but only where the end itself was not in English: a site that logs its ends
in English logs its stops in English too, so an unknown row after an English end is a
plugin's own (a webhook's "Webhook delivered: HTTP 200"), not a stop.
A start whose context is not one Action Scheduler ships (a plugin's own) is recognised by
the words before a known context, learned from the site's own starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from actionscheduler_exporter.collectors.log_events.classify import Event, Kind, classify
from actionscheduler_exporter.metrics.catalog import RUNNERS

# The contexts Action Scheduler's runners log, and the runner label each counts under.
# `wp action-scheduler work` (the persistent worker of the 4.x line) logs "WP CLI Worker":
# a dedicated worker like `wp action-scheduler run`, so it counts as wp_cli.
CONTEXT_LABELS: dict[str, str] = {**RUNNERS, "WP CLI Worker": "wp_cli"}
# Longest first: a context that another one ends with is tried after that one.
CONTEXTS: tuple[str, ...] = tuple(sorted(CONTEXT_LABELS, key=len, reverse=True))


def runner_label(context: str) -> str | None:
    """The runner label of a logged context; None for a context of a plugin's own."""
    return CONTEXT_LABELS.get(context)


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
        for context in CONTEXTS:
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
    english_end = False
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
            english_end = classify(row.message, CONTEXTS) is not None
            phase = "ended"
        elif phase == "ended" and runner is None:  # "action ignored via …" is no stop
            # Action Scheduler writes at most one stop, right after the end.
            if recurring and not english_end:
                events[row.log_id] = Event(Kind.STOPPED, "unknown")
            phase = "after"
    return events, learned
