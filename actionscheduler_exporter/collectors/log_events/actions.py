"""The actions behind a scrape's log rows: what each is (hook, group, status, schedule)
and its whole log, read in chunks of ids."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from actionscheduler_exporter.collectors.log_events.classify import Event
from actionscheduler_exporter.collectors.log_events.structure import (
    LoggedRow,
    RunnerContexts,
    events_by_place,
)
from actionscheduler_exporter.db.schema import (
    chunks,
    is_recurring,
    label_value,
    placeholders,
    schedule_head,
    status_of,
)
from actionscheduler_exporter.db.tables import group_slugs
from actionscheduler_exporter.sources.database import DatabaseContext

# Characters of a message read: enough for every message Action Scheduler writes (a
# missing callback names a hook of up to 191 characters), never a whole exception text of
# 64 KB, so memory is bounded by the rows read, not by what actions log.
MESSAGE_CHARACTERS = 512
_FLOOR = dt.datetime(2000, 1, 1)


@dataclass(frozen=True)
class LogRow:
    log_id: int
    action_id: int
    message: str
    date: dt.datetime | None
    identity: object = ""


@dataclass(frozen=True)
class Action:
    hook: str
    group: str
    status: str
    scheduled: dt.datetime | None
    recurring: bool


def lookup_actions(context: DatabaseContext, action_ids: Iterable[int]) -> dict[int, Action]:
    found: dict[int, tuple[Any, ...]] = {}
    for chunk in chunks(sorted(action_ids)):
        for row in context.query(
            "SELECT action_id, hook, group_id, status, scheduled_date_gmt,"
            f" {schedule_head()} FROM {context.tables.actions}"
            f" WHERE action_id IN ({placeholders(chunk)})",
            chunk,
        ):
            found[int(row[0])] = row
    slugs = group_slugs(
        context.session, context.tables, (int(row[2] or 0) for row in found.values())
    )
    return {
        action_id: Action(
            label_value(hook),
            slugs.get(int(group_id or 0), ""),
            status_of(status),
            valid_date(scheduled),
            is_recurring(schedule),
        )
        for action_id, (_, hook, group_id, status, scheduled, schedule) in found.items()
    }


class ActionHistory:
    """Every log row of some actions (id, date, the start of the message): their start
    rows, their latest rows, and what each row's place in the action's log tells."""

    def __init__(self, context: DatabaseContext, action_ids: Iterable[int]) -> None:
        self._rows: dict[int, list[tuple[int, dt.datetime | None, str]]] = {}
        for chunk in chunks(sorted(action_ids)):
            for action_id, log_id, date, message in context.query(
                f"SELECT action_id, log_id, log_date_gmt, LEFT(message, {MESSAGE_CHARACTERS})"
                f" FROM {context.tables.logs}"
                f" WHERE action_id IN ({placeholders(chunk)}) ORDER BY log_id",
                chunk,
            ):
                self._rows.setdefault(int(action_id), []).append(
                    (int(log_id), valid_date(date), label_value(message))
                )

    def events_by_place(
        self, actions: dict[int, Action], contexts: RunnerContexts
    ) -> dict[int, Event]:
        """The event each row's place tells, by log id (see structure.py). A second pass
        when the first taught `contexts` the words of this site's starts."""
        for _ in range(2):
            events: dict[int, Event] = {}
            learned = False
            for action_id, rows in self._rows.items():
                action = actions.get(action_id)
                if action is None:
                    continue
                found, new_words = events_by_place(
                    [LoggedRow(log_id, message) for log_id, _, message in rows],
                    action.status,
                    action.recurring,
                    contexts,
                )
                events.update(found)
                learned = learned or new_words
            if not learned:
                break
        return events

    def previousvalid_date(self, row: LogRow) -> dt.datetime | None:
        """The date of the action's log row just before this one (its start, for an end)."""
        earlier = [
            date for log_id, date, _ in self._rows.get(row.action_id, []) if log_id < row.log_id
        ]
        return earlier[-1] if earlier else None


def valid_date(value: Any) -> dt.datetime | None:
    return value if isinstance(value, dt.datetime) and value >= _FLOOR else None
