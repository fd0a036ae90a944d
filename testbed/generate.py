"""Fills a database with a realistic store's Action Scheduler tables, fast.

Rows are written as tab-separated files in chunks and loaded with LOAD DATA LOCAL INFILE
(far faster than INSERTs). Action ids grow with creation time: finished history first,
then actions scheduled for the future, then the due backlog, then one running batch.

    python -m bench.generate --actions 1000000          # into the bench server
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pymysql

from testbed.schema import ZERO_DATE, create_statements
from testbed.store_profile import FAILURE_MESSAGES, HOOKS, StoreProfile, hook_weights

PREFIX = "wp_"
CHUNK_ROWS = 500_000
DAY = 86_400
CLAIM_ID = 1
_SCHEDULE = (
    'O:30:"ActionScheduler_SimpleSchedule":2:{s:22:"\\0*\\0scheduled_timestamp";'
    'i:%d;s:41:"\\0ActionScheduler_SimpleSchedule\\0timestamp";i:%d;}'
)
_ACTION_COLUMNS = (
    "action_id, hook, status, scheduled_date_gmt, scheduled_date_local, priority,"
    " args, schedule, group_id, attempts, last_attempt_gmt, last_attempt_local,"
    " claim_id, extended_args"
)
_LOG_COLUMNS = "log_id, action_id, message, log_date_gmt, log_date_local"


def is_generated(connection: pymysql.connections.Connection[Any], profile: StoreProfile) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'bench_meta'",
            (profile.name,),
        )
        if not cursor.fetchone():
            return False
        cursor.execute(f"SELECT profile FROM `{profile.name}`.bench_meta")
        row = cursor.fetchone()
    return bool(row) and json.loads(row[0]) == asdict(profile)


def generate(
    connection: pymysql.connections.Connection[Any],
    profile: StoreProfile,
    database: str | None = None,
) -> float:
    """Creates the store's database (by default named after the profile) from scratch;
    returns the seconds it took."""
    started = time.monotonic()
    database = database or profile.name
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cursor.execute(f"CREATE DATABASE `{database}` DEFAULT CHARACTER SET utf8mb4")
        cursor.execute(f"USE `{database}`")
        for statement in create_statements(PREFIX):
            cursor.execute(statement)
        groups = sorted({group for _, group in HOOKS})
        cursor.executemany(
            f"INSERT INTO {PREFIX}actionscheduler_groups (slug) VALUES (%s)",
            [(slug,) for slug in groups],
        )
        rows = _Rows(profile, {slug: index + 1 for index, slug in enumerate(groups)})
        cursor.execute(
            f"INSERT INTO {PREFIX}actionscheduler_claims VALUES (%s, %s)",
            (CLAIM_ID, _date(rows.now - 10)),
        )
        with tempfile.TemporaryDirectory(prefix="as-bench-") as folder:
            for actions, logs in rows.chunks():
                _load(
                    cursor,
                    Path(folder) / "actions.tsv",
                    f"{PREFIX}actionscheduler_actions",
                    _ACTION_COLUMNS,
                    actions,
                )
                _load(
                    cursor,
                    Path(folder) / "logs.tsv",
                    f"{PREFIX}actionscheduler_logs",
                    _LOG_COLUMNS,
                    logs,
                )
        for table in ("actions", "logs", "claims", "groups"):
            cursor.execute(f"ANALYZE TABLE {PREFIX}actionscheduler_{table}")
            cursor.fetchall()
        seconds = time.monotonic() - started
        cursor.execute(
            "CREATE TABLE bench_meta (profile text, generated_at datetime, seconds double)"
        )
        cursor.execute(
            "INSERT INTO bench_meta VALUES (%s, UTC_TIMESTAMP(), %s)",
            (json.dumps(asdict(profile)), seconds),
        )
    return seconds


def _load(
    cursor: pymysql.cursors.Cursor, path: Path, table: str, columns: str, lines: list[str]
) -> None:
    path.write_text("".join(lines), encoding="utf-8")
    cursor.execute(
        f"LOAD DATA LOCAL INFILE %s INTO TABLE {table} CHARACTER SET utf8mb4"
        f" FIELDS TERMINATED BY '\\t' LINES TERMINATED BY '\\n' ({columns})",
        (str(path),),
    )


class _Rows:
    """The rows of the profile's store, as lines of the two big tables."""

    def __init__(self, profile: StoreProfile, group_ids: dict[str, int]) -> None:
        self.profile = profile
        self.now = int(time.time())
        self._random = random.Random(profile.seed)
        self._group_ids = group_ids
        self._hook_weights = hook_weights()
        self._next_log_id = 1
        total = profile.actions
        self._future = int(total * profile.future_share)
        self._history = total - self._future - profile.due - profile.batch_size
        if self._history < 0:
            raise ValueError(f"{total} actions cannot hold a backlog of {profile.due}")
        self._failed_share = profile.failed_share * total / max(1, self._history)
        self._canceled_share = profile.canceled_share * total / max(1, self._history)

    def chunks(self) -> Iterator[tuple[list[str], list[str]]]:
        actions: list[str] = []
        logs: list[str] = []
        for action_id in range(1, self.profile.actions + 1):
            self._action(action_id, actions, logs)
            if len(actions) >= CHUNK_ROWS:
                yield actions, logs
                actions, logs = [], []
        if actions:
            yield actions, logs

    def _action(self, action_id: int, actions: list[str], logs: list[str]) -> None:
        rnd = self._random
        hook, group = self._random.choices(HOOKS, self._hook_weights)[0]
        history, future, due = self._history, self._future, self.profile.due
        claim_id, attempts = 0, 0
        last_attempt: int | None = None
        if action_id <= history:
            roll = rnd.random()
            if roll < self._failed_share:
                status, scheduled = "failed", self.now - rnd.randrange(90 * DAY)
                last_attempt, attempts = scheduled + rnd.randrange(120), 1
            elif roll < self._failed_share + self._canceled_share:
                status, scheduled = "canceled", self.now - rnd.randrange(31 * DAY)
            else:
                status, scheduled = "complete", self.now - rnd.randrange(31 * DAY)
                last_attempt, attempts = scheduled + 1 + rnd.randrange(60), 1
        elif action_id <= history + future:
            status, scheduled = "pending", self.now + 60 + rnd.randrange(30 * DAY)
        elif action_id <= history + future + due:
            # A backlog builds up over hours when the runners stop.
            status, scheduled = "pending", self.now - rnd.randrange(max(3600, due // 50))
        else:  # the running batch: its first action started, the others wait in its claim
            first = action_id == history + future + due + 1
            status = "in-progress" if first else "pending"
            scheduled, claim_id, last_attempt = self.now - 30, CLAIM_ID, self.now - 10
            attempts = 1 if first else 0
        args = f"[{rnd.randrange(1, 10_000_000)}]"
        schedule = _SCHEDULE % (scheduled, scheduled)
        scheduled_text = _date(scheduled)
        attempt_text = _date(last_attempt) if last_attempt is not None else ZERO_DATE
        actions.append(
            f"{action_id}\t{hook}\t{status}\t{scheduled_text}\t{scheduled_text}\t10\t{args}\t"
            f"{schedule}\t{self._group_ids[group]}\t{attempts}\t{attempt_text}\t"
            f"{attempt_text}\t{claim_id}\t\\N\n"
        )
        created = min(scheduled, self.now) - rnd.randrange(1, 600)
        self._log(logs, action_id, "action created", created)
        if last_attempt is None or status == "pending":
            if status == "canceled":
                self._log(logs, action_id, "action canceled", scheduled)
            return
        start = last_attempt if status != "complete" else scheduled + 1
        self._log(logs, action_id, "action started via WP CLI", start)
        if status == "complete":
            self._log(logs, action_id, "action complete via WP CLI", last_attempt)
        elif status == "failed":
            reason = FAILURE_MESSAGES[action_id % len(FAILURE_MESSAGES)]
            self._log(logs, action_id, f"action failed via WP CLI: {reason}", last_attempt + 2)

    def _log(self, logs: list[str], action_id: int, message: str, when: int) -> None:
        text = _date(when)
        logs.append(f"{self._next_log_id}\t{action_id}\t{message}\t{text}\t{text}\n")
        self._next_log_id += 1


def _date(epoch: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))
