"""The `schedule` column as Action Scheduler writes it: a PHP-serialized schedule object.

The property layout follows ActionScheduler_Abstract_Schedule and its subclasses' __sleep
in 3.x (protected properties carry "\\0*\\0", private ones "\\0Class\\0"); the exporter reads
only the class name at the start.
"""

from __future__ import annotations

import datetime as dt

SINGLE = "single"
ASYNC = "async"
INTERVAL = "interval"
CRON = "cron"
KINDS = (SINGLE, ASYNC, INTERVAL, CRON)
RECURRING = (INTERVAL, CRON)


def _string(text: str) -> str:
    return f's:{len(text.encode())}:"{text}";'


def _object(name: str, properties: list[tuple[str, str]]) -> str:
    body = "".join(_string(key) + value for key, value in properties)
    return f'O:{len(name)}:"{name}":{len(properties)}:{{{body}}}'


def serialized(kind: str, when: dt.datetime, recurrence: int | str = 3600) -> str:
    """The schedule of an action due at `when`; `recurrence`: seconds (interval) or a cron
    expression (cron)."""
    stamp = f"i:{int(when.replace(tzinfo=dt.UTC).timestamp())};"
    if kind == ASYNC:
        return 'O:28:"ActionScheduler_NullSchedule":0:{}'
    if kind == SINGLE:
        name = "ActionScheduler_SimpleSchedule"
        return _object(
            name,
            [("\0*\0scheduled_timestamp", stamp), (f"\0{name}\0timestamp", stamp)],
        )
    if kind == INTERVAL:
        name, value = "ActionScheduler_IntervalSchedule", f"i:{int(recurrence)};"
        private = "interval_in_seconds"
    elif kind == CRON:
        name, value = "ActionScheduler_CronSchedule", _string(str(recurrence))
        private = "cron"
    else:
        raise ValueError(f"unknown schedule kind {kind!r}")
    return _object(
        name,
        [
            ("\0*\0scheduled_timestamp", stamp),
            ("\0*\0first_timestamp", stamp),
            ("\0*\0recurrence", value),
            (f"\0{name}\0start_timestamp", stamp),
            (f"\0{name}\0{private}", value),
        ],
    )
