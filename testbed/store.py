"""Changes Action Scheduler's tables the way its PHP classes do, statement for statement.

ActionScheduler_DBStore (create, claim, start, complete, fail, release, cancel),
ActionScheduler_QueueCleaner (reset, mark failed, purge) and ActionScheduler_DBLogger
(one log row per transition), as 3.x writes them; testbed.as4 adds what 4.x writes.
Tests describe queue histories with it instead of hand-made rows. A clock offset lets a
test write a history that happened minutes ago.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pymysql

from testbed import schedules, schema
from testbed.messages import ENGLISH, Messages

_DEADLOCK = 1213
_DEADLOCK_RETRIES = 5
Date = dt.datetime | str  # a datetime, or schema.ZERO_DATE
# What a worker does with a started action: None completes it, a string fails it with
# that exception message.
Outcome = Callable[[str], str | None]


@dataclass(frozen=True)
class Claim:
    claim_id: int
    action_ids: tuple[int, ...]


class ActionSchedulerStore:
    def __init__(
        self,
        connection: pymysql.connections.Connection[Any],
        prefix: str = "wp_",
        messages: Messages = ENGLISH,
    ) -> None:
        self.connection = connection
        self.prefix = prefix
        # The site's language: the words of every log row it writes.
        self.messages = messages
        self.offset = dt.timedelta(0)
        self._frozen: dt.datetime | None = None
        self._in_transaction = False
        # WordPress drops strict modes and NO_ZERO_DATE for its own connection; so do we.
        self._execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")

    # -- tables ------------------------------------------------------------------------
    @property
    def actions(self) -> str:
        return f"{self.prefix}actionscheduler_actions"

    @property
    def claims(self) -> str:
        return f"{self.prefix}actionscheduler_claims"

    @property
    def groups(self) -> str:
        return f"{self.prefix}actionscheduler_groups"

    @property
    def logs(self) -> str:
        return f"{self.prefix}actionscheduler_logs"

    def create_tables(self, charset: str = "utf8mb4") -> None:
        for statement in schema.create_statements(self.prefix, charset):
            self._execute(statement)

    def drop_tables(self) -> None:
        for name in schema.table_names(self.prefix):
            self._execute(f"DROP TABLE IF EXISTS {name}")

    # -- time --------------------------------------------------------------------------
    def now(self) -> dt.datetime:
        """The database's UTC time (second resolution, as Action Scheduler writes it)."""
        if self._frozen is not None:
            return self._frozen - self.offset
        rows = self._query("SELECT UTC_TIMESTAMP()")
        value = rows[0][0]
        assert isinstance(value, dt.datetime)
        return value - self.offset

    @contextlib.contextmanager
    def frozen(self) -> Iterator[dt.datetime]:
        """Every write inside the block happens at the same second: exact histories."""
        self._frozen = self.now()
        try:
            yield self._frozen
        finally:
            self._frozen = None

    @contextlib.contextmanager
    def seconds_ago(self, seconds: float) -> Iterator[None]:
        """Writes inside the block happen `seconds` in the past."""
        previous = self.offset
        self.offset = dt.timedelta(seconds=seconds)
        try:
            yield
        finally:
            self.offset = previous

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes inside the block are committed together: a reader sees all of them or
        none, never a history half-written (a scrape in the middle would see its counts
        rise, where a real site wrote them over days)."""
        self.connection.begin()
        self._in_transaction = True
        try:
            yield
        except BaseException:
            self.connection.rollback()
            raise
        else:
            self.connection.commit()
        finally:
            self._in_transaction = False

    # -- ActionScheduler_DBStore -------------------------------------------------------
    def create(
        self,
        hook: str,
        *,
        group: str = "",
        scheduled: Date | None = None,
        args: list[Any] | None = None,
        priority: int = 10,
        status: str = "pending",
        schedule: str = schedules.SINGLE,
        recurrence: int | str = 3600,
    ) -> int:
        """save_action(): a new row and its "action created" log row.

        scheduled defaults to now, as for as_enqueue_async_action() in 3.x. `schedule`:
        single, async, interval (every `recurrence` seconds) or cron (`recurrence`).
        """
        now = self.now()
        when = now if scheduled is None else scheduled
        group_id = self._group_id(group)
        encoded = json.dumps(args or [])
        cursor = self._execute(
            f"INSERT INTO {self.actions} (hook, status, scheduled_date_gmt, scheduled_date_local,"
            " priority, args, schedule, group_id, extended_args)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                hook,
                status,
                when,
                when,
                priority,
                encoded if len(encoded) <= 191 else _hash(encoded),
                schedules.serialized(
                    schedule, when if isinstance(when, dt.datetime) else now, recurrence
                ),
                group_id,
                encoded if len(encoded) > 191 else None,
            ),
        )
        action_id = int(cursor.lastrowid)
        self.log(action_id, self.messages.created)
        return action_id

    def create_failed_many(
        self, hooks_and_groups: list[tuple[str, str]], message: str = "Supplier API unreachable"
    ) -> None:
        """Many actions that ran once and failed: the rows create(), start() and fail()
        leave, written in a few multi-row statements (for histories of thousands)."""
        now = self.now()
        for slug in sorted({group for _, group in hooks_and_groups if group}):
            self._group_id(slug)
        ids = dict(self._query(f"SELECT slug, group_id FROM {self.groups}"))
        rows = [
            (hook, "failed", now, now, 10, "[]", int(ids.get(group, 0)), 1, now, now)
            for hook, group in hooks_and_groups
        ]
        first = None
        for start in range(0, len(rows), 1000):
            cursor = self._executemany(
                f"INSERT INTO {self.actions} (hook, status, scheduled_date_gmt,"
                " scheduled_date_local, priority, args, group_id, attempts, last_attempt_gmt,"
                " last_attempt_local) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows[start : start + 1000],
            )
            first = first if first is not None else int(cursor.lastrowid)
        assert first is not None
        for text in (
            self.messages.created,
            self.messages.start("WP CLI"),
            self.messages.failure("WP CLI", message),
        ):
            self._executemany(
                f"INSERT INTO {self.logs} (action_id, message, log_date_gmt, log_date_local)"
                " VALUES (%s, %s, %s, %s)",
                [(first + index, text, now, now) for index in range(len(rows))],
            )

    def stake_claim(self, batch_size: int = 25) -> Claim:
        """Inserts the claim row, then claims due pending actions in the runner's order."""
        now = self.now()
        cursor = self._execute(f"INSERT INTO {self.claims} (date_created_gmt) VALUES (%s)", (now,))
        claim_id = int(cursor.lastrowid)
        self._execute(
            f"UPDATE {self.actions} SET claim_id = %s, last_attempt_gmt = %s,"
            " last_attempt_local = %s"
            " WHERE claim_id = 0 AND scheduled_date_gmt <= %s AND status = 'pending'"
            " ORDER BY priority ASC, attempts ASC, scheduled_date_gmt ASC, action_id ASC"
            " LIMIT %s",
            (claim_id, now, now, now, batch_size),
        )
        rows = self._query(
            f"SELECT action_id FROM {self.actions} WHERE claim_id = %s"
            " ORDER BY priority ASC, attempts ASC, scheduled_date_gmt ASC, action_id ASC",
            (claim_id,),
        )
        return Claim(claim_id, tuple(int(row[0]) for row in rows))

    def start(self, action_id: int, via: str = "WP CLI") -> None:
        """log_execution()."""
        now = self.now()
        self._execute(
            f"UPDATE {self.actions} SET attempts = attempts + 1, status = 'in-progress',"
            " last_attempt_gmt = %s, last_attempt_local = %s WHERE action_id = %s",
            (now, now, action_id),
        )
        self.log(action_id, self.messages.start(via))

    def complete(self, action_id: int, via: str = "WP CLI") -> None:
        """mark_complete(): last_attempt_gmt becomes the finish time."""
        now = self.now()
        self._execute(
            f"UPDATE {self.actions} SET status = 'complete', last_attempt_gmt = %s,"
            " last_attempt_local = %s WHERE action_id = %s",
            (now, now, action_id),
        )
        self.log(action_id, self.messages.completion(via))

    def fail(self, action_id: int, message: str, via: str = "WP CLI") -> None:
        """mark_failure(): only the status changes; last_attempt_gmt keeps the start."""
        self._set_failed(action_id)
        self.log(action_id, self.messages.failure(via, message))

    def fail_without_callback(self, action_id: int, hook: str, via: str = "WP CLI") -> None:
        self.fail(
            action_id,
            f"Scheduled action for {hook} will not be executed as no callbacks are registered.",
            via,
        )

    def fatal(
        self, action_id: int, claim_id: int, error: str = "Allowed memory size exhausted"
    ) -> None:
        """The fatal-error monitor: fails the action, logs it, releases the claim."""
        self._set_failed(action_id)
        self.log(
            action_id,
            self.messages.fatal
            % {"error": error, "file": "/var/www/html/wp-content/plugins/shop/job.php", "line": 42},
        )
        self.release_claim(claim_id)

    def release_claim(self, claim_id: int) -> None:
        self._execute(f"UPDATE {self.actions} SET claim_id = 0 WHERE claim_id = %s", (claim_id,))
        self._execute(f"DELETE FROM {self.claims} WHERE claim_id = %s", (claim_id,))

    def cancel(self, action_id: int) -> None:
        self._execute(
            f"UPDATE {self.actions} SET status = 'canceled' WHERE action_id = %s", (action_id,)
        )
        self.log(action_id, self.messages.canceled)

    def log(self, action_id: int, message: str) -> None:
        now = self.now()
        self._execute(
            f"INSERT INTO {self.logs} (action_id, message, log_date_gmt, log_date_local)"
            " VALUES (%s, %s, %s, %s)",
            (action_id, message, now, now),
        )

    # -- ActionScheduler_QueueCleaner ----------------------------------------------------
    def cleaner_reset(self, timeout: int = 300) -> int:
        """reset_timeouts(): claimed pending actions older than the timeout are unclaimed."""
        ids = self._ids(
            f"SELECT action_id FROM {self.actions} WHERE status = 'pending' AND claim_id != 0"
            " AND last_attempt_gmt <= %s",
            (self.now() - dt.timedelta(seconds=timeout),),
        )
        for action_id in ids:
            self._execute(
                f"UPDATE {self.actions} SET claim_id = 0 WHERE action_id = %s", (action_id,)
            )
            self.log(action_id, self.messages.reset)
        return len(ids)

    def cleaner_mark_failed(self, failure_period: int = 300) -> int:
        """mark_failures(): in-progress actions older than the failure period fail."""
        ids = self._ids(
            f"SELECT action_id FROM {self.actions} WHERE status = 'in-progress'"
            " AND last_attempt_gmt <= %s",
            (self.now() - dt.timedelta(seconds=failure_period),),
        )
        for action_id in ids:
            self._set_failed(action_id)
            self.log(action_id, self.messages.timed_out % failure_period)
        return len(ids)

    def purge(self, retention: int = 31 * 86400) -> int:
        """delete_old_actions(): complete and canceled actions past retention, with logs."""
        ids = self._ids(
            f"SELECT action_id FROM {self.actions} WHERE status IN ('complete', 'canceled')"
            " AND last_attempt_gmt <= %s",
            (self.now() - dt.timedelta(seconds=retention),),
        )
        for action_id in ids:
            self.delete_action(action_id)
        return len(ids)

    def reschedule(self, action_id: int, when: dt.datetime) -> None:
        """A direct update of the action's date (a plugin's or a DBA's SQL), which Action
        Scheduler does not log."""
        self._execute(
            f"UPDATE {self.actions} SET scheduled_date_gmt = %s, scheduled_date_local = %s"
            " WHERE action_id = %s",
            (when, when, action_id),
        )

    def newest_action_id(self) -> int:
        return self._ids(f"SELECT MAX(action_id) FROM {self.actions}", ())[0]

    def delete_action(self, action_id: int) -> None:
        """DBStore::delete_action(), then DBLogger's clear_deleted_action_logs() on the
        `action_scheduler_deleted_action` it fires: the row, then its log rows."""
        self._execute(f"DELETE FROM {self.actions} WHERE action_id = %s", (action_id,))
        self.clear_logs(action_id)

    def clear_logs(self, action_id: int) -> None:
        self._execute(f"DELETE FROM {self.logs} WHERE action_id = %s", (action_id,))

    # -- a runner ------------------------------------------------------------------------
    def run_batch(
        self, batch_size: int = 25, outcome: Outcome | None = None, via: str = "WP CLI"
    ) -> Claim:
        """A healthy `wp action-scheduler run` batch: claim, run each, release."""
        claim = self.stake_claim(batch_size)
        for action_id in claim.action_ids:
            self.run_action(action_id, outcome, via)
        self.release_claim(claim.claim_id)
        return claim

    def run_action(
        self, action_id: int, outcome: Outcome | None = None, via: str = "WP CLI"
    ) -> None:
        self.start(action_id, via)
        error = outcome(self.hook_of(action_id)) if outcome else None
        if error is None:
            self.complete(action_id, via)
        else:
            self.fail(action_id, error, via)

    def kill_worker_mid_batch(self, batch_size: int = 25, finished: int = 1) -> Claim:
        """A worker killed by SIGKILL: some actions done, one running, no release."""
        claim = self.stake_claim(batch_size)
        for action_id in claim.action_ids[:finished]:
            self.run_action(action_id)
        if len(claim.action_ids) > finished:
            self.start(claim.action_ids[finished])
        return claim

    # -- recurring actions (ActionScheduler_Abstract_QueueRunner, 3.5+) ------------------
    def run_recurring(
        self,
        action_id: int,
        error: str | None = None,
        via: str = "WP CLI",
        *,
        threshold: int = 5,
        next_instance_error: str | None = None,
    ) -> int | None:
        """process_action() of an interval or cron action (failed with `error`, if given),
        then schedule_next_instance(): the next occurrence's id, or None when none was
        scheduled (consistently failing, or `next_instance_error` thrown by repeat())."""
        self.start(action_id, via)
        if error is None:
            self.complete(action_id, via)
        else:
            self.fail(action_id, error, via)
        if error is not None and self.consistently_failing(action_id, threshold):
            self.log(action_id, self.messages.consistently_failing)
            return None
        if next_instance_error is not None:
            self.log(action_id, self.messages.next_instance_failed % next_instance_error)
            return None
        return self.repeat(action_id)

    def consistently_failing(self, action_id: int, threshold: int = 5) -> bool:
        """recurring_action_is_consistently_failing(), query for query: the hook's
        threshold-th action scheduled before now, in query_actions()' default order
        (scheduled date, ascending), among failed ones and among all."""
        hook, now = self.hook_of(action_id), self.now()

        def nth(condition: str) -> int | None:
            ids = self._ids(
                f"SELECT action_id FROM {self.actions} WHERE hook = %s{condition}"
                " AND scheduled_date_gmt < %s ORDER BY scheduled_date_gmt ASC LIMIT %s, 1",
                (hook, now, threshold - 1),
            )
            return ids[0] if ids else None

        failing = nth(" AND status = 'failed'")
        return failing is not None and nth("") == failing

    def repeat(self, action_id: int) -> int:
        """ActionScheduler_ActionFactory::repeat(): the next occurrence, same hook, args,
        group and priority. An interval's is one interval from now; a cron's is an hour
        from now here (this writer does not evaluate cron expressions)."""
        rows = self._query(
            f"SELECT a.hook, a.args, a.extended_args, a.priority, a.schedule, g.slug"
            f" FROM {self.actions} a LEFT JOIN {self.groups} g ON g.group_id = a.group_id"
            " WHERE a.action_id = %s",
            (action_id,),
        )
        hook, args, extended, priority, schedule, group = rows[0]
        interval = re.search(r'interval_in_seconds";i:(\d+);', str(schedule))
        cron = re.search(r'\0cron";s:\d+:"([^"]*)";', str(schedule))
        kind = schedules.INTERVAL if interval else schedules.CRON
        recurrence: int | str = (
            int(interval.group(1)) if interval else (cron.group(1) if cron else "0 * * * *")
        )
        step = int(recurrence) if isinstance(recurrence, int) else 3600
        return self.create(
            str(hook),
            group=str(group or ""),
            scheduled=self.now() + dt.timedelta(seconds=step),
            args=json.loads(extended or args or "[]"),
            priority=int(priority),
            schedule=kind,
            recurrence=recurrence,
        )

    def unschedule_all(self, hook: str) -> int:
        """as_unschedule_all_actions(): every pending action of the hook is canceled."""
        ids = self._ids(
            f"SELECT action_id FROM {self.actions} WHERE hook = %s AND status = 'pending'",
            (hook,),
        )
        for action_id in ids:
            self.cancel(action_id)
        return len(ids)

    def hook_of(self, action_id: int) -> str:
        rows = self._query(f"SELECT hook FROM {self.actions} WHERE action_id = %s", (action_id,))
        return str(rows[0][0])

    # -- plumbing ------------------------------------------------------------------------
    def _set_failed(self, action_id: int) -> None:
        self._execute(
            f"UPDATE {self.actions} SET status = 'failed' WHERE action_id = %s", (action_id,)
        )

    def _group_id(self, slug: str) -> int:
        rows = self._query(f"SELECT group_id FROM {self.groups} WHERE slug = %s", (slug,))
        if rows:
            return int(rows[0][0])
        if not slug:
            return 0  # Action Scheduler writes 0 for "no group" when it has no such row
        return int(
            self._execute(f"INSERT INTO {self.groups} (slug) VALUES (%s)", (slug,)).lastrowid
        )

    def _ids(self, sql: str, args: tuple[Any, ...]) -> list[int]:
        return [int(row[0]) for row in self._query(sql, args)]

    def _query(self, sql: str, args: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> pymysql.cursors.Cursor:
        cursor: pymysql.cursors.Cursor = self.connection.cursor()
        cursor.executemany(sql, rows)
        cursor.close()
        return cursor

    def _execute(self, sql: str, args: tuple[Any, ...] | None = None) -> pymysql.cursors.Cursor:
        # Concurrent runners deadlock on the claim UPDATE now and then, as on real sites;
        # the statement is retried, as WordPress' callers effectively do on the next run.
        for attempt in range(_DEADLOCK_RETRIES):
            cursor: pymysql.cursors.Cursor = self.connection.cursor()
            try:
                cursor.execute(sql, args)
                return cursor
            except pymysql.err.OperationalError as error:
                # in a transaction a deadlock rolled back every earlier statement too
                retry = not self._in_transaction and attempt < _DEADLOCK_RETRIES - 1
                if error.args[0] != _DEADLOCK or not retry:
                    raise
            finally:
                cursor.close()
        raise AssertionError("unreachable")


def _hash(encoded: str) -> str:
    import hashlib

    return hashlib.md5(encoded.encode(), usedforsecurity=False).hexdigest()
