"""The due backlog split by group and by hook, for dedicated runners and their autoscaling.

Action Scheduler's indexes hold no group next to the due date, so the split reads rows: the
oldest `due_split_rows` due actions, in the order of the (status, scheduled_date_gmt)
index, one statement. The oldest actions are the ones that are late, so every group's
oldest due age is exact as long as it has one of them; beyond the cap the backlog is only
counted (`actionscheduler_due_actions_unsplit`), from the due collector's total of the
same round. With nothing due (that total is 0) the split sends no statement.

It needs the due collector's reading of the same round (`needs`), for the total. With
`due_split_interval` above 0 a site's split is re-read at most that often (its freshness:
in the round, kept between; each prefix at its own point of the interval, so that a
network's subsites do not all refresh in one scrape) and served from its last reading in
between. Nothing due is always current, and a backlog that appears after it is split at
once (`cacheable`).

When the interval has passed and the backlog is the one that was split (as many due
actions, the same oldest one, and no log row written since: Action Scheduler logs every
action created, started, finished or canceled), the kept split is renewed instead of read
again (`renewed`): its counts as they were, its ages older by the seconds the oldest due
action aged meanwhile, on the server's clock. A thousand stores whose backlogs wait cost a
split each per scrape at Prometheus' pace otherwise, doubling the database server's work
and the exporter's (docs/performance.md). What the check cannot see (an action deleted
while another became due, with no log row between two scrapes) is read again at the
latest `RENEWED_AT_MOST` seconds after the split's last statement.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from actionscheduler_exporter.collectors.due import due_total, oldest_due_age
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, label_value, seconds
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.folding import fold, fold_oldest
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext
from actionscheduler_exporter.sources.source import Freshness, in_round_every
from actionscheduler_exporter.timing import Clock

# Seconds after the split's last statement that a backlog which looks unchanged is split
# again all the same (what `renewed` cannot see is that late at most).
RENEWED_AT_MOST = 300.0
_AGES = (catalog.OLDEST_DUE_AGE_BY_GROUP, catalog.OLDEST_DUE_AGE_BY_HOOK)


@dataclass(frozen=True)
class _Backlog:
    """The due backlog a split was read from, as the round's hot statement saw it."""

    due: int  # every due action (the due collector's count)
    oldest: int | None  # the oldest due action's date, as a number (0: the zero date)
    newest_log: int | None  # the newest log row's id
    age: float  # the oldest due action's age (the due collector's)
    split_at: float  # the clock time of the split's last statement


class DueSplitCollector(Collector):
    name = "due_split"
    needs = ("due",)
    metrics = (
        catalog.DUE_BY_GROUP,
        catalog.OLDEST_DUE_AGE_BY_GROUP,
        catalog.DUE_BY_HOOK,
        catalog.OLDEST_DUE_AGE_BY_HOOK,
        catalog.DUE_UNSPLIT,
    )

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        # Per table prefix, the backlog its kept split was read from.
        self._split_from: dict[str, _Backlog] = {}

    def freshness(self, site: SiteConfig) -> Freshness:
        return in_round_every(site.due_split_interval)

    def cacheable(self, context: DatabaseContext) -> bool:
        """Nothing due is always current: neither served from nor kept for later."""
        return due_total(context.earlier.get("due")) != 0

    def columns(self, context: DatabaseContext) -> Columns | None:
        """What tells whether the backlog changed (`renewed`), asked for while a split is
        kept (the same statement from one round to the next, as a store's waiting
        backlog is): both answered without reading a row (the first entry of an index
        range, the end of the log's primary key)."""
        if context.site.due_split_rows == 0 or self.name not in context.kept:
            return None
        return _backlog_columns(context.tables.actions, context.tables.logs)

    def read(self, context: DatabaseContext) -> Iterable[Sample]:
        if context.site.due_split_rows == 0:
            return ()
        due = context.earlier.get("due")
        total = due_total(due)
        limit = context.site.due_split_rows
        rows = [] if total == 0 else context.query(*self._statement(context, limit))
        samples = tuple(self._split(context, total, rows))
        # The backlog it was read from: the due collector's count and age, read before
        # it (a change meanwhile shows at the next renewal), the oldest date and the
        # newest log row as the split's own statement saw them.
        backlog = None
        if rows and total is not None and (age := oldest_due_age(due)) is not None:
            try:
                oldest = min(row[5] for row in rows)
            except TypeError:  # a date that cannot be one: no backlog to renew from
                oldest = None
            else:
                backlog = _backlog(total, oldest, rows[0][6], age, self._clock())
        if backlog is None:
            self._split_from.pop(context.tables.prefix, None)
        else:
            self._split_from[context.tables.prefix] = backlog
        return samples

    def renewed(
        self, kept: Sequence[Sample], context: DatabaseContext
    ) -> tuple[Sample, ...] | None:
        """The kept split with its ages brought up to date, when the backlog is the one it
        was read from and its last statement is recent enough; None: read it again."""
        prefix = context.tables.prefix
        was = self._split_from.get(prefix)
        if was is None or self._clock() - was.split_at >= RENEWED_AT_MOST:
            return None
        now = self._backlog_now(context)
        if now is None or (now.due, now.oldest, now.newest_log) != (
            was.due,
            was.oldest,
            was.newest_log,
        ):
            return None
        # The same oldest action: its age grew by the seconds that passed on the server.
        aged = now.age - was.age
        self._split_from[prefix] = _Backlog(
            was.due, was.oldest, was.newest_log, now.age, was.split_at
        )
        if not aged:
            return tuple(kept)
        return tuple(
            Sample(item.metric, max(0.0, item.value + aged), item.labels)
            if item.metric in _AGES
            else item
            for item in kept
        )

    def retain(self, prefixes: Collection[str]) -> None:
        for gone in self._split_from.keys() - set(prefixes):
            del self._split_from[gone]

    def _backlog_now(self, context: DatabaseContext) -> _Backlog | None:
        """The backlog as this round's hot statement saw it; None when it cannot tell."""
        if self.columns(context) is None:
            return None
        due = context.earlier.get("due")
        total, age = due_total(due), oldest_due_age(due)
        if total is None or age is None:
            return None
        oldest, newest_log = context.values_of(self)
        return _backlog(total, oldest, newest_log, age, self._clock())

    def _split(
        self, context: DatabaseContext, total_due: int | None, rows: list[Row]
    ) -> Iterator[Sample]:
        limit = context.site.due_split_rows
        by_group: Counter[str] = Counter()
        by_hook: Counter[str] = Counter()
        age_by_group: dict[str, float] = {}
        age_by_hook: dict[str, float] = {}
        split = 0
        zero_dated = 0
        for slug, hook, count, age, zeros, _, _ in rows:
            group = label_value(slug)  # NULL (no group, or a deleted one): ""
            by_group[group] += int(count)
            hook_name = label_value(hook)
            by_hook[hook_name] += int(count)
            age_by_group[group] = max(age_by_group.get(group, 0.0), seconds(age))
            age_by_hook[hook_name] = max(age_by_hook.get(hook_name, 0.0), seconds(age))
            split += int(count)
            zero_dated += int(zeros or 0)
        if zero_dated:
            for group, hook_name, age in self._zero_dated_ages(context):
                age_by_group[group] = max(age_by_group.get(group, 0.0), age)
                age_by_hook[hook_name] = max(age_by_hook.get(hook_name, 0.0), age)

        named_groups = {group.slug for group in context.site.groups}
        yield from _folded(
            catalog.DUE_BY_GROUP,
            "group",
            by_group,
            context.site.top_groups,
            named_groups,
            ages=(catalog.OLDEST_DUE_AGE_BY_GROUP, age_by_group),
        )
        yield from _folded(
            catalog.DUE_BY_HOOK,
            "hook",
            by_hook,
            context.site.top_hooks,
            set(context.site.hooks),
            ages=(catalog.OLDEST_DUE_AGE_BY_HOOK, age_by_hook),
        )
        unsplit = 0
        if split >= limit:
            total = self._due_total(context) if total_due is None else total_due
            unsplit = max(0, total - split)
        yield sample(catalog.DUE_UNSPLIT, unsplit)

    @staticmethod
    def _statement(context: DatabaseContext, limit: int) -> tuple[str, tuple[object, ...]]:
        """Per group and hook among the `limit` oldest due actions: how many, the age of
        the oldest validly dated one, how many are zero-dated, and the oldest date as a
        number; with the newest log row's id (`renewed` tells a change by them)."""
        oldest = (
            "SELECT group_id, hook, scheduled_date_gmt"
            f" FROM {context.tables.actions}"
            " WHERE status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP()"
            " ORDER BY scheduled_date_gmt LIMIT %s"
        )
        valid_date = "IF(scheduled_date_gmt >= %s, scheduled_date_gmt, NULL)"
        counted = (
            f"SELECT group_id, hook, COUNT(*) AS actions,"
            f" TIMESTAMPDIFF(SECOND, MIN({valid_date}), UTC_TIMESTAMP()) AS age,"
            f" SUM(scheduled_date_gmt < %s) AS zero_dated,"
            " CAST(MIN(scheduled_date_gmt) AS UNSIGNED) AS first_date"
            f" FROM ({oldest}) AS oldest GROUP BY group_id, hook"
        )
        # The slugs joined to the counts, not looked up apart: one round trip per scrape.
        return (
            "SELECT g.slug, c.hook, c.actions, c.age, c.zero_dated, c.first_date,"
            f" (SELECT MAX(log_id) FROM {context.tables.logs})"
            f" FROM ({counted}) AS c LEFT JOIN {context.tables.groups} g"
            " ON g.group_id = c.group_id",
            (VALID_DATE_FLOOR, VALID_DATE_FLOOR, limit),
        )

    @staticmethod
    def _due_total(context: DatabaseContext) -> int:
        """Every due action, counted on the (status, scheduled_date_gmt) index alone (when
        the due collector did not count them in this round)."""
        (total,) = context.one(
            f"SELECT COUNT(*) FROM {context.tables.actions}"
            " WHERE status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP()"
        )
        return int(total or 0)

    @staticmethod
    def _zero_dated_ages(context: DatabaseContext) -> Iterable[tuple[str, str, float]]:
        """Zero-dated due actions are as old as their first log row ("action created")."""
        tables = context.tables
        for slug, hook, age in context.query(
            "SELECT g.slug, a.hook,"
            " TIMESTAMPDIFF(SECOND, MIN(l.log_date_gmt), UTC_TIMESTAMP())"
            f" FROM {tables.actions} a JOIN {tables.logs} l ON l.action_id = a.action_id"
            f" LEFT JOIN {tables.groups} g ON g.group_id = a.group_id"
            " WHERE a.status = 'pending' AND a.scheduled_date_gmt < %s"
            " AND l.log_date_gmt >= %s GROUP BY a.group_id, g.slug, a.hook",
            (VALID_DATE_FLOOR, VALID_DATE_FLOOR),
        ):
            yield label_value(slug), label_value(hook), seconds(age)


def _folded(
    metric: catalog.MetricDef,
    label: str,
    counts: Counter[str],
    limit: int,
    named: set[str],
    ages: tuple[catalog.MetricDef, dict[str, float]],
) -> Iterator[Sample]:
    """The top `limit` values and the named ones (0 when absent) keep their label; the rest
    are summed under "other" (their ages: the oldest)."""
    folded, _ = fold(counts, limit, named)
    oldest = fold_oldest(ages[1], folded)
    for value, count in sorted(folded.items()):
        yield sample(metric, count, **{label: value})
        yield sample(ages[0], oldest[value], **{label: value})


def _backlog(total: int, oldest: Any, newest_log: Any, age: float, at: float) -> _Backlog | None:
    """The backlog of these values; None when they cannot be one (then it is read again)."""
    try:
        return _Backlog(
            total,
            None if oldest is None else int(oldest),
            None if newest_log is None else int(newest_log),
            age,
            at,
        )
    except (TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=4096)
def _backlog_columns(actions: str, logs: str) -> Columns:
    """The oldest due action's date as a number (its age changes every second, the date
    only when another action is the oldest) and the newest log row's id. Made once per
    table."""
    return Columns(
        (
            f"SELECT CAST(MIN(scheduled_date_gmt) AS UNSIGNED) FROM {actions}"
            " WHERE status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP()",
            f"SELECT MAX(log_id) FROM {logs}",
        ),
        nullable=frozenset({0, 1}),  # nothing due; no log row
    )
