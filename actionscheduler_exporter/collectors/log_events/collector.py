"""Counters and histograms from Action Scheduler's log, read with a cursor on log_id.

The log is an append-only event stream: one row per transition of every action. Each
scrape reads only the rows that are new since the last one (an indexed range on the
primary key, at most `log_rows_per_scrape` of them), then looks up the hook, group,
status and scheduled date of the actions concerned in one batched query, and the earlier
log rows of the actions that finished (their start time) in another.

Counters start at zero when the exporter starts, and the cursor starts at the newest row,
so a restart never replays history. State is changed only after every query of the
scrape succeeded, so a failed scrape loses nothing and counts nothing twice.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actionscheduler_exporter.collectors.log_events.actions import (
    MESSAGE_CHARACTERS,
    Action,
    ActionHistory,
    LogRow,
    lookup_actions,
    valid_date,
)
from actionscheduler_exporter.collectors.log_events.classify import Event, Kind, classify
from actionscheduler_exporter.collectors.log_events.cursor import LogCursor
from actionscheduler_exporter.collectors.log_events.histogram import Histogram
from actionscheduler_exporter.collectors.log_events.structure import (
    CONTEXTS,
    RunnerContexts,
    runner_label,
)
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import (
    label_value,
)
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.catalog import OTHER, MetricDef
from actionscheduler_exporter.metrics.folding import StickyFold
from actionscheduler_exporter.metrics.samples import Labels, Sample, sample, whole_sample
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext
from actionscheduler_exporter.timing import Clock

# Log dates have one-second resolution, so a measured 0 is "under a second" and sits in
# the 0.5 bucket; the rest are spread for webhooks (seconds) up to imports (an hour).
RUN_DURATION_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
# Start delay: from "on time" (under a second) to Action Scheduler's one-day past-due mark.
START_DELAY_BUCKETS = (0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
_COUNTER_FOR = {
    Kind.CREATED: catalog.CREATED,
    Kind.STARTED: catalog.STARTED,
    Kind.COMPLETED: catalog.COMPLETED,
    Kind.FAILED: catalog.FAILED,
    Kind.CANCELED: catalog.CANCELED,
    Kind.RESET: catalog.RESET,
    Kind.STOPPED: catalog.RECURRING_STOPPED,
    Kind.CORRUPTED: catalog.CORRUPTED_CANCELED,
}

_OUTCOMES = {Kind.COMPLETED: "completed", Kind.FAILED: "failed"}
# Runs whose end the log dates precisely; a cleaner's timeout says nothing of the run.
_TIMED_ENDS = {Kind.COMPLETED, Kind.FAILED}


# Which row a log id holds: its action and its date, as one text.
_IDENTITY = "CONCAT(action_id, ' ', COALESCE(log_date_gmt, ''))"


@functools.lru_cache(maxsize=8192)
def _log_columns(logs: str, *, first: bool) -> Columns:
    """Made once per table (the same in every round but the first)."""
    newest = f"SELECT COALESCE(MAX(log_id), 0) FROM {logs}"
    if first:
        return Columns((newest, "SELECT @@auto_increment_increment"))
    return Columns((newest,))


def _after_replay(
    rows: list[LogRow], replay_until: dt.datetime | None
) -> tuple[list[LogRow], dt.datetime | None]:
    """The rows to count, and whether a replay goes on: after a restart, rows dated before
    the newest counted before it are a restored backup's history (counted once already),
    until the first row that is not. (Rows of that very second are counted: new events
    right after a truncation are more likely than a backup taken in that second.)"""
    if replay_until is None:
        return rows, None
    for index, row in enumerate(rows):
        if row.date is not None and row.date >= replay_until:
            return rows[index:], None
    return [], replay_until


class LogEventsCollector(Collector):
    """The site's log streams, one per table prefix: the one collector that keeps state."""

    name = "log_events"
    metrics = (
        catalog.CREATED,
        catalog.STARTED,
        catalog.STARTED_BY_RUNNER,
        catalog.COMPLETED,
        catalog.FAILED,
        catalog.FINISHED,
        catalog.CANCELED,
        catalog.RESET,
        catalog.RECURRING_STOPPED,
        catalog.CORRUPTED_CANCELED,
        catalog.START_DELAY,
        catalog.START_DELAY_BY_HOOK,
        catalog.RUN_DURATION,
        catalog.LOG_ROWS_READ,
        catalog.LOG_ROWS_UNCLASSIFIED,
        catalog.LOG_CURSOR_LAG,
        catalog.LOG_CURSOR_RESETS,
        catalog.LOG_ROWS_MISSED,
    )

    def __init__(self, site: SiteConfig, clock: Clock = time.monotonic) -> None:
        self._site = site
        self._clock = clock
        self._streams: dict[str, LogEventsStream] = {}

    def columns(self, context: DatabaseContext) -> Columns:
        return self._stream(context.tables.prefix).columns(context.tables.logs)

    def read(self, context: DatabaseContext) -> tuple[Sample, ...]:
        stream = self._stream(context.tables.prefix)
        newest, *increment = context.values_of(self)
        return stream.read(context, int(newest or 0), *increment)

    def _stream(self, prefix: str) -> LogEventsStream:
        stream = self._streams.get(prefix)
        if stream is None:
            stream = self._streams[prefix] = LogEventsStream(self._site, self._clock)
        return stream


class LogEventsStream:
    """One table prefix's cursor, counters and histograms."""

    def __init__(self, site: SiteConfig, clock: Clock) -> None:
        self.rows_per_scrape = site.log_rows_per_scrape
        self._gap_grace = site.log_gap_grace
        self._clock = clock
        self._cursor: LogCursor | None = None
        self._counters: Counter[tuple[MetricDef, Labels]] = Counter(
            {
                (catalog.STARTED_BY_RUNNER, (("runner", runner),)): 0
                for runner in catalog.RUNNER_LABELS
            }
        )
        self._contexts = RunnerContexts()
        classic = site.classic_histograms
        self._start_delay = Histogram(catalog.START_DELAY, START_DELAY_BUCKETS, classic)
        self._run_duration = Histogram(catalog.RUN_DURATION, RUN_DURATION_BUCKETS, classic)
        # Native only (protobuf exposition): by hook it costs one series per hook, not 17.
        self._start_delay_by_hook = Histogram(catalog.START_DELAY_BY_HOOK, (), native_only=True)
        self._hooks = StickyFold(site.top_hooks)
        self._groups = StickyFold(site.top_groups)
        self._rows_read = 0
        self._unclassified = 0
        self._resets = 0
        self._missed = 0
        # The last row read (log_id, "action_id date"): if its id comes back holding
        # another row, the table was emptied and refilled past the cursor between two
        # scrapes (the same actions' ids again, but not at the same second).
        self._last_read: tuple[int, str] | None = None
        # After a restart: the newest date counted before it. Rows dated earlier are a
        # restored backup's history, already counted, until one that is not is read.
        self._replay_until: dt.datetime | None = None
        self._newest_counted: dt.datetime | None = None
        # The samples of what was counted, built again only after something was (a quiet
        # store's round builds none).
        self._counted: tuple[Sample, ...] | None = None

    def columns(self, logs: str) -> Columns:
        """The newest log id; in the first reading also the server's
        auto_increment_increment (Galera: the cluster's size), which the cursor starts
        from."""
        return _log_columns(logs, first=self._cursor is None)

    def read(self, context: DatabaseContext, newest: int, increment: Any = 1) -> tuple[Sample, ...]:
        """`newest` and `increment`: the values of `columns`. The stream's state changes
        only once every statement of the reading has succeeded."""
        cursor = self._cursor
        if cursor is None:  # first scrape: start at the newest row, never replay history
            stride = max(1, int(increment or 1))
            cursor = self._cursor = LogCursor(newest, self._gap_grace, stride=stride)
        # Ids that went backwards: truncated or re-created, and not empty (a table whose
        # rows were all deleted keeps counting up).
        restarted = 0 < newest < cursor.position
        fetched: list[LogRow] = []
        if restarted:
            fetched = self._fetch(context, 0)
        elif newest > cursor.position:
            start = self._fetch_start(cursor)
            # The last row read, when the cursor is at it, comes on top of the limit.
            fetched = self._fetch(context, start, extra=int(start < cursor.position))
            if self._refilled(fetched):
                restarted, fetched = True, self._fetch(context, 0)
        replay_until = self._newest_counted if restarted else self._replay_until
        rows = fetched if restarted else [row for row in fetched if cursor.is_new(row.log_id)]
        rows, replay_until = _after_replay(rows, replay_until)
        tally = self._tally(context, rows) if rows else None
        self._commit(cursor, restarted, fetched, rows, tally, replay_until)
        return self._samples(cursor.unread(newest))

    def _fetch_start(self, cursor: LogCursor) -> int:
        """Where the new rows are read from: the cursor, or the row before it when the
        last row read is the cursor's, so that the fetch shows which row that id holds
        now (a last row read above the cursor, beyond a gap, is in the fetch anyway)."""
        if self._last_read is not None and self._last_read[0] == cursor.position > 0:
            return cursor.position - 1
        return cursor.position

    def _refilled(self, fetched: list[LogRow]) -> bool:
        """The last row read is another row now: the table was emptied and refilled past
        the cursor between two scrapes (the same actions' ids again, but not at the same
        second). Told when new rows arrive (a table refilled to exactly the id it had is
        told at its next row, then read from its start: nothing is lost). A row that is
        gone (its action purged) tells nothing."""
        if self._last_read is None:
            return False
        last_id, last_identity = self._last_read
        return any(
            row.log_id == last_id and label_value(row.identity) != last_identity for row in fetched
        )

    def _fetch(self, context: DatabaseContext, start: int, extra: int = 0) -> list[LogRow]:
        """The rows above `start`, at most `rows_per_scrape` (and `extra`: the last row
        read, fetched again); a quiet store, with nothing above the cursor, sends no such
        statement."""
        return [
            LogRow(int(log_id), int(action_id), label_value(message), valid_date(date), identity)
            for log_id, action_id, message, date, identity in context.query(
                f"SELECT log_id, action_id, LEFT(message, {MESSAGE_CHARACTERS}),"
                f" log_date_gmt, {_IDENTITY} FROM {context.tables.logs}"
                " WHERE log_id > %s ORDER BY log_id LIMIT %s",
                (start, self.rows_per_scrape + extra),
            )
        ]

    def _commit(
        self,
        cursor: LogCursor,
        restarted: bool,
        fetched: list[LogRow],
        rows: list[LogRow],
        tally: _Tally | None,
        replay_until: dt.datetime | None,
    ) -> None:
        """What a reading adds, once all its statements succeeded (`tally`: None when it
        counted no row)."""
        if restarted:
            cursor.restart()
            self._resets += 1
            self._counted = None
        self._replay_until = replay_until
        # The last row read, fetched again to tell whether it is the same row, is behind
        # the cursor: not an id to advance over.
        new_ids = [row.log_id for row in fetched if row.log_id > cursor.position]
        self._missed += cursor.advance(new_ids, self._clock())
        if fetched:
            self._last_read = (fetched[-1].log_id, label_value(fetched[-1].identity))
        dates = [row.date for row in rows if row.date is not None]
        if dates:
            self._newest_counted = max([*dates, *filter(None, [self._newest_counted])])
        if tally is None:
            return
        self._counted = None
        for pair in tally.pairs:
            self._initialise(pair)
        for hook in tally.recurring_hooks:
            for reason in catalog.STOP_REASONS:
                key = (catalog.RECURRING_STOPPED, (("hook", hook), ("reason", reason)))
                self._counters.setdefault(key, 0)
        self._counters.update(tally.counters)
        self._start_delay.merge(tally.start_delay)
        self._start_delay_by_hook.merge(tally.start_delay_by_hook)
        self._run_duration.merge(tally.run_duration)
        self._rows_read += len(rows)
        self._unclassified += tally.unclassified

    def _tally(self, context: DatabaseContext, rows: Sequence[LogRow]) -> _Tally:
        tally = _Tally(
            self._start_delay.empty_copy(),
            self._run_duration.empty_copy(),
            self._start_delay_by_hook.empty_copy(),
        )
        if not rows:
            return tally
        events = [(row, classify(row.message, CONTEXTS)) for row in rows]
        actions = lookup_actions(context, {row.action_id for row in rows})
        needs_history = {
            row.action_id for row, event in events if event is None or event.kind in _TIMED_ENDS
        }
        history = ActionHistory(context, needs_history)
        by_place = history.events_by_place(actions, self._contexts)

        for row, recognised in events:
            action = actions.get(row.action_id)
            event = recognised or by_place.get(row.log_id)
            if event is None:
                tally.unclassified += 1
                continue
            if event.kind is Kind.STARTED:
                runner = runner_label(event.runner) or OTHER
                tally.counters[(catalog.STARTED_BY_RUNNER, (("runner", runner),))] += 1
            metric = _COUNTER_FOR.get(event.kind)
            if metric is None:
                continue
            hook = self._hooks(action.hook) if action else OTHER
            group = self._groups(action.group) if action else OTHER
            if action and action.recurring:
                tally.recurring_hooks.add(hook)
            if event.kind is Kind.STOPPED:
                tally.recurring_hooks.add(hook)
                tally.counters[(metric, (("hook", hook), ("reason", event.reason)))] += 1
                continue
            labels: Labels = (("hook", hook), ("group", group))
            tally.pairs.add(labels)
            if event.kind is Kind.FAILED:
                labels = (*labels, ("reason", event.reason))
            tally.counters[(metric, labels)] += 1
            if event.kind in _OUTCOMES:
                outcome = (("group", group), ("outcome", _OUTCOMES[event.kind]))
                tally.counters[(catalog.FINISHED, outcome)] += 1
            self._observe_timing(tally, row, event, action, hook, group, history)
        return tally

    @staticmethod
    def _observe_timing(
        tally: _Tally,
        row: LogRow,
        event: Event,
        action: Action | None,
        hook: str,
        group: str,
        history: ActionHistory,
    ) -> None:
        if row.date is None:
            return
        if event.kind is Kind.STARTED and action and action.scheduled:
            delay = (row.date - action.scheduled).total_seconds()
            tally.start_delay.observe((("group", group),), max(0.0, delay))
            tally.start_delay_by_hook.observe((("hook", hook),), max(0.0, delay))
        elif event.kind in _TIMED_ENDS and event.reason != "timeout":
            started = history.previous_date(row)
            if started is not None:
                duration = (row.date - started).total_seconds()
                tally.run_duration.observe((("hook", hook),), max(0.0, duration))

    def _initialise(self, pair: Labels) -> None:
        """Every counter of a (hook, group) pair exists from its first event on, so the
        pair's later first failure of a kind is an increase from 0 that rate() sees."""
        for metric in _COUNTER_FOR.values():
            if metric is catalog.RECURRING_STOPPED:
                continue  # per hook, for recurring hooks only (see read)
            if metric is catalog.FAILED:
                for reason in catalog.FAILURE_REASONS:
                    self._counters.setdefault((metric, (*pair, ("reason", reason))), 0)
            else:
                self._counters.setdefault((metric, pair), 0)
        group = pair[1]
        for outcome in catalog.OUTCOMES:
            self._counters.setdefault((catalog.FINISHED, (group, ("outcome", outcome))), 0)

    def _samples(self, lag: int) -> tuple[Sample, ...]:
        if self._counted is None:  # something was counted since they were last built
            self._counted = self._counted_samples()
        return (
            *self._counted,
            whole_sample(catalog.LOG_CURSOR_LAG, lag),
            whole_sample(catalog.LOG_ROWS_MISSED, self._missed),
        )

    def _counted_samples(self) -> tuple[Sample, ...]:
        counters = sorted(self._counters.items(), key=lambda item: (item[0][0].name, item[0][1]))
        return (
            *(Sample(metric, count, labels) for (metric, labels), count in counters),
            *self._start_delay.samples(),
            *self._start_delay_by_hook.samples(),
            *self._run_duration.samples(),
            sample(catalog.LOG_ROWS_READ, self._rows_read),
            sample(catalog.LOG_ROWS_UNCLASSIFIED, self._unclassified),
            sample(catalog.LOG_CURSOR_RESETS, self._resets),
        )


@dataclass
class _Tally:
    """What one scrape's rows add, kept apart until the scrape has fully succeeded."""

    start_delay: Histogram
    run_duration: Histogram
    start_delay_by_hook: Histogram

    def __post_init__(self) -> None:
        self.counters: Counter[tuple[MetricDef, Labels]] = Counter()
        self.pairs: set[Labels] = set()
        self.recurring_hooks: set[str] = set()
        self.unclassified = 0


def newest_log_id(context: DatabaseContext) -> int | None:
    """The newest log row's id as the round's hot statement read it for the log events
    collector (None: not in this round's statement, or not a whole number)."""
    values = context.prefetched.get(LogEventsCollector.name)
    if not values:
        return None
    try:
        return int(values[0] or 0)
    except (TypeError, ValueError):
        return None
