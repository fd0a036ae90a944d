"""Independent ground truth: every row read plainly, every metric computed in Python.

Deliberately shares no query with the exporter: it reads whole tables and applies
Action Scheduler's definitions (docs/action-scheduler.md) row by row.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pymysql

TIMEOUT = dt.timedelta(seconds=300)
FLOOR = dt.datetime(2000, 1, 1)


@dataclass(frozen=True)
class RawRows:
    """The tables as read, for a truth row that needs what no field below computes."""

    now: dt.datetime
    actions: tuple[
        tuple[Any, ...], ...
    ]  # action_id, hook, status, scheduled, group, attempt, claim
    claims: tuple[tuple[Any, ...], ...]  # claim_id, date_created_gmt
    groups: dict[int, str]  # group_id: slug
    logs: tuple[tuple[Any, ...], ...]  # action_id, log_date_gmt


@dataclass
class Truth:
    raw: RawRows
    statuses: Counter[str]
    by_status_group: Counter[tuple[str, str]]
    due_unclaimed: int
    due_claimed: int
    zero_dated: int
    null_dated: int
    oldest_due_age: float
    in_progress: int
    oldest_in_progress_age: float
    active_claims: int
    claim_rows: int
    oldest_claim_age: float
    orphaned_claims: int
    stale_claimed: int
    failed_by_hook: Counter[str]
    oldest_finished_age: float
    due_by_group: Counter[str]
    due_by_hook: Counter[str]
    oldest_due_age_by_group: dict[str, float]
    oldest_due_age_by_hook: dict[str, float]


def _valid(value: Any) -> dt.datetime | None:
    # PyMySQL returns the zero date as the string '0000-00-00 00:00:00'.
    if isinstance(value, dt.datetime) and value >= FLOOR:
        return value
    return None


def _age(now: dt.datetime, dates: list[dt.datetime]) -> float:
    return max(0.0, (now - min(dates)).total_seconds()) if dates else 0.0


def compute(connection: pymysql.connections.Connection[Any], prefix: str = "wp_") -> Truth:
    with connection.cursor() as cursor:
        cursor.execute("SELECT UTC_TIMESTAMP()")
        now = cursor.fetchone()[0]
        cursor.execute(
            f"SELECT action_id, hook, status, scheduled_date_gmt, group_id,"
            f" last_attempt_gmt, claim_id FROM {prefix}actionscheduler_actions"
        )
        actions = cursor.fetchall()
        cursor.execute(f"SELECT claim_id, date_created_gmt FROM {prefix}actionscheduler_claims")
        claims = cursor.fetchall()
        cursor.execute(f"SELECT group_id, slug FROM {prefix}actionscheduler_groups")
        slugs = {int(group_id): slug for group_id, slug in cursor.fetchall()}
        cursor.execute(f"SELECT action_id, log_date_gmt FROM {prefix}actionscheduler_logs")
        logs = tuple(cursor.fetchall())
        first_log: dict[int, dt.datetime] = {}
        for action_id, date in logs:
            if _valid(date) and (action_id not in first_log or date < first_log[action_id]):
                first_log[action_id] = date

    statuses: Counter[str] = Counter(
        dict.fromkeys(("pending", "in-progress", "complete", "failed", "canceled"), 0)
    )
    by_status_group: Counter[tuple[str, str]] = Counter()
    failed_by_hook: Counter[str] = Counter()
    due_unclaimed = due_claimed = zero_dated = null_dated = in_progress = stale = 0
    due_dates: list[dt.datetime] = []
    due_by_group: Counter[str] = Counter()
    due_by_hook: Counter[str] = Counter()
    due_dates_by_group: dict[str, list[dt.datetime]] = {}
    due_dates_by_hook: dict[str, list[dt.datetime]] = {}
    running_since: list[dt.datetime] = []
    finished_dates: list[dt.datetime] = []
    open_claims: set[int] = set()
    for action_id, hook, status, scheduled, group_id, last_attempt, claim_id in actions:
        known = status if status in statuses else "unknown"
        statuses[known] += 1
        by_status_group[(known, slugs.get(group_id, ""))] += 1
        if status == "failed":
            failed_by_hook[hook] += 1
        if status in ("pending", "in-progress") and claim_id:
            open_claims.add(claim_id)
        if status == "in-progress":
            in_progress += 1
            if _valid(last_attempt):
                running_since.append(last_attempt)
        if status in ("complete", "canceled") and _valid(last_attempt):
            finished_dates.append(last_attempt)
        if status != "pending":
            continue
        if claim_id and _valid(last_attempt) and now - last_attempt >= TIMEOUT:
            stale += 1
        if scheduled is None:
            null_dated += 1
            continue
        date = _valid(scheduled)
        if date is not None and date > now:
            continue  # future: not due
        if claim_id:
            due_claimed += 1
        else:
            due_unclaimed += 1
        group = slugs.get(group_id, "")
        due_by_group[group] += 1
        due_by_hook[hook] += 1
        group_dates = due_dates_by_group.setdefault(group, [])
        hook_dates = due_dates_by_hook.setdefault(hook, [])
        if date is None:
            zero_dated += 1
            if action_id in first_log:
                due_dates.append(first_log[action_id])
                group_dates.append(first_log[action_id])
                hook_dates.append(first_log[action_id])
        else:
            due_dates.append(date)
            group_dates.append(date)
            hook_dates.append(date)

    claim_dates = [date for _, date in claims if _valid(date)]
    orphaned = sum(
        1
        for claim_id, date in claims
        if claim_id not in open_claims and _valid(date) and now - date > TIMEOUT
    )
    return Truth(
        raw=RawRows(now, tuple(actions), tuple(claims), slugs, logs),
        statuses=statuses,
        by_status_group=by_status_group,
        due_unclaimed=due_unclaimed,
        due_claimed=due_claimed,
        zero_dated=zero_dated,
        null_dated=null_dated,
        oldest_due_age=_age(now, due_dates),
        in_progress=in_progress,
        oldest_in_progress_age=_age(now, running_since),
        active_claims=len(open_claims),
        claim_rows=len(claims),
        oldest_claim_age=_age(now, claim_dates),
        orphaned_claims=orphaned,
        stale_claimed=stale,
        failed_by_hook=failed_by_hook,
        oldest_finished_age=_age(now, finished_dates),
        due_by_group=due_by_group,
        due_by_hook=due_by_hook,
        oldest_due_age_by_group={
            group: _age(now, dates) for group, dates in due_dates_by_group.items()
        },
        oldest_due_age_by_hook={
            hook: _age(now, dates) for hook, dates in due_dates_by_hook.items()
        },
    )


@dataclass
class LogTruth:
    """The events an English log's rows record, read row by row from the words Action
    Scheduler begins each message with (docs/action-scheduler-4.md)."""

    created: int
    started_by_context: Counter[str]
    completed: int
    failed: int
    canceled: int
    corrupted: int
    other: int  # rows Action Scheduler writes that count as no event (ignored, fetch errors)
    rows: int


def log_events(connection: pymysql.connections.Connection[Any], prefix: str = "wp_") -> LogTruth:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT message FROM {prefix}actionscheduler_logs")
        messages = [str(message) for (message,) in cursor.fetchall()]
    truth = LogTruth(0, Counter(), 0, 0, 0, 0, 0, len(messages))
    for message in messages:
        if message == "action created":
            truth.created += 1
        elif message.startswith("action started via "):
            truth.started_by_context[message.removeprefix("action started via ")] += 1
        elif message.startswith("action complete via "):
            truth.completed += 1
        elif message.startswith(("action failed via ", "action marked as failed after ")):
            truth.failed += 1
        elif message == "action canceled":
            truth.canceled += 1
        elif message.startswith("This action data appears to be corrupt. "):
            truth.corrupted += 1
        elif message.startswith(("action ignored", "There was a failure fetching")):
            truth.other += 1
    return truth
