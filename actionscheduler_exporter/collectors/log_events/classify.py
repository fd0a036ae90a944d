"""What a log row says happened, from the English messages of ActionScheduler_Logger.

Sites in another language write translated messages; for those, `structure` reads the
event from the row's place in its action's log instead (a failure's reason then stays
`unknown`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    CREATED = "created"
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    RESET = "reset"
    STOPPED = "stopped"  # a recurring action's next occurrence was not scheduled
    OTHER = "other"  # recognised, but not an event we count (ignored, fetch errors, ...)


@dataclass(frozen=True)
class Event:
    kind: Kind
    reason: str = ""  # FAILED: exception, timeout, fatal, no_callback, unknown; STOPPED too
    runner: str = ""  # STARTED: the context of "action started via %s", as logged


_STARTED = "action started via "
_NO_CALLBACK = "will not be executed as no callbacks are registered"
_PREFIXES: tuple[tuple[str, Event], ...] = (
    ("action created", Event(Kind.CREATED)),
    ("action complete", Event(Kind.COMPLETED)),  # "… via %s", or without a context
    ("action marked as failed after ", Event(Kind.FAILED, "timeout")),
    ("unexpected shutdown: PHP Fatal error", Event(Kind.FAILED, "fatal")),
    ("action reset", Event(Kind.RESET)),
    ("action canceled", Event(Kind.CANCELED)),
    ("action ignored via ", Event(Kind.OTHER)),
    (
        "This action appears to be consistently failing.",
        Event(Kind.STOPPED, "consistently_failing"),
    ),
    (
        "There was a failure scheduling the next instance",
        Event(Kind.STOPPED, "next_instance_failed"),
    ),
    ("There was a failure ", Event(Kind.OTHER)),
)


def classify(message: str) -> Event | None:
    """The event an English message records, or None when the text is not recognised."""
    if message.startswith(_STARTED):
        return Event(Kind.STARTED, runner=message[len(_STARTED) :])
    if message == "action started":  # process_action() called without a context
        return Event(Kind.STARTED)
    if message.startswith(("action failed via ", "action failed: ")):
        reason = "no_callback" if _NO_CALLBACK in message else "exception"
        return Event(Kind.FAILED, reason)
    for prefix, event in _PREFIXES:
        if message.startswith(prefix):
            return event
    return None
