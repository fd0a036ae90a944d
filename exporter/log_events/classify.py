"""What a log row says happened, from the English messages of ActionScheduler_Logger.

Sites in another language write translated messages; for those, `infer` derives the
outcome from the action's current status instead (the reason then stays `unknown`).
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
    OTHER = "other"  # recognised, but not an event we count (ignored, fetch errors, ...)


@dataclass(frozen=True)
class Event:
    kind: Kind
    reason: str = ""  # for FAILED: exception, timeout, fatal, no_callback, unknown


_NO_CALLBACK = "will not be executed as no callbacks are registered"
_PREFIXES: tuple[tuple[str, Event], ...] = (
    ("action created", Event(Kind.CREATED)),
    ("action started via ", Event(Kind.STARTED)),
    ("action complete via ", Event(Kind.COMPLETED)),
    ("action marked as failed after ", Event(Kind.FAILED, "timeout")),
    ("unexpected shutdown: PHP Fatal error", Event(Kind.FAILED, "fatal")),
    ("action reset", Event(Kind.RESET)),
    ("action canceled", Event(Kind.CANCELED)),
    ("action ignored via ", Event(Kind.OTHER)),
    ("There was a failure ", Event(Kind.OTHER)),
)
_TERMINAL_BY_STATUS = {
    "complete": Event(Kind.COMPLETED),
    "failed": Event(Kind.FAILED, "unknown"),
    "canceled": Event(Kind.CANCELED),
    "in-progress": Event(Kind.STARTED),
}


def classify(message: str) -> Event | None:
    """The event an English message records, or None when the text is not recognised."""
    if message.startswith("action failed via "):
        reason = "no_callback" if _NO_CALLBACK in message else "exception"
        return Event(Kind.FAILED, reason)
    for prefix, event in _PREFIXES:
        if message.startswith(prefix):
            return event
    return None


def infer(status: str | None, is_latest_row: bool) -> Event | None:
    """For an unrecognised message: the action's last transition, read from its status.

    Only the latest log row of an action can be matched to its current status; earlier
    unrecognised rows stay unclassified.
    """
    if not is_latest_row or status is None:
        return None
    return _TERMINAL_BY_STATUS.get(status)
