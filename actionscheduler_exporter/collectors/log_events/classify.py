"""What a log row says happened, from the English messages of ActionScheduler_Logger.

Sites in another language write translated messages; for those, `structure` reads the
event from the row's place in its action's log instead (a failure's reason then stays
`unknown`). Every message is recognised by the words Action Scheduler begins it with,
never by a phrase found elsewhere in it: an exception's own text can say anything.
docs/action-scheduler-4.md lists the messages of 3.6 to 4.x and where they come from.
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
    CORRUPTED = "corrupted"  # 4.0+: canceled because its data could not be read
    OTHER = "other"  # recognised, but not an event we count (ignored, fetch errors, ...)


@dataclass(frozen=True)
class Event:
    kind: Kind
    reason: str = ""  # FAILED: exception, timeout, fatal, no_callback, unknown; STOPPED too
    runner: str = ""  # STARTED: the context of "action started via %s", as logged


_STARTED = "action started via "
_FAILED_VIA = "action failed via "
_FAILED = "action failed: "  # process_action() called without a context
# ActionScheduler_Action::execute()'s exception when nothing is hooked: the whole text of
# the exception, after the logger's "action failed via %s: ".
_NO_CALLBACK_START = "Scheduled action for "
_NO_CALLBACK_END = " will not be executed as no callbacks are registered."
_PREFIXES: tuple[tuple[str, Event], ...] = (
    ("action created", Event(Kind.CREATED)),
    ("action complete", Event(Kind.COMPLETED)),  # "… via %s", or without a context
    ("action marked as failed after ", Event(Kind.FAILED, "timeout")),
    # The same timeout as worded by some 4.x releases (reported by 4.0 guides; the stored
    # 3.x and 4.x loggers use the wording above): both count.
    ("action was in-progress for at least ", Event(Kind.FAILED, "timeout")),
    ("unexpected shutdown: PHP Fatal error", Event(Kind.FAILED, "fatal")),
    ("action reset", Event(Kind.RESET)),
    ("action canceled", Event(Kind.CANCELED)),
    ("action ignored", Event(Kind.OTHER)),  # "… via %s", or without a context
    (
        "This action appears to be consistently failing.",
        Event(Kind.STOPPED, "consistently_failing"),
    ),
    (
        "There was a failure scheduling the next instance",
        Event(Kind.STOPPED, "next_instance_failed"),
    ),
    ("There was a failure ", Event(Kind.OTHER)),  # fetching this action
    ("This action data appears to be corrupt.", Event(Kind.CORRUPTED)),
)


def classify(message: str, contexts: tuple[str, ...] = ()) -> Event | None:
    """The event an English message records, or None when the text is not recognised.

    `contexts`: the runner contexts known to end "action failed via %s" before its ": "
    (a context of a plugin's own may hold ": " too; without a known one, the first ": "
    ends it)."""
    if message.startswith(_STARTED):
        return Event(Kind.STARTED, runner=message[len(_STARTED) :])
    if message == "action started":  # process_action() called without a context
        return Event(Kind.STARTED)
    if message.startswith(_FAILED_VIA):
        return Event(Kind.FAILED, _failure_reason(_error_after_context(message, contexts)))
    if message.startswith(_FAILED):
        return Event(Kind.FAILED, _failure_reason(message[len(_FAILED) :]))
    for prefix, event in _PREFIXES:
        if message.startswith(prefix):
            return event
    return None


def _error_after_context(message: str, contexts: tuple[str, ...]) -> str:
    rest = message[len(_FAILED_VIA) :]
    for context in sorted(contexts, key=len, reverse=True):
        if rest.startswith(f"{context}: "):
            return rest[len(context) + 2 :]
    _, _, error = rest.partition(": ")
    return error


def _failure_reason(error: str) -> str:
    """no_callback only for Action Scheduler's own exception, whole: a plugin's exception
    that quotes those words somewhere is an exception."""
    if error.startswith(_NO_CALLBACK_START) and error.endswith(_NO_CALLBACK_END):
        return "no_callback"
    return "exception"
