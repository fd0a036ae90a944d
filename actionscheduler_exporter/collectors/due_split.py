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

When the interval has passed and the backlog is the one that was split, the kept split is
renewed instead of read again (`renewed`): its counts as they were, its ages older by the
seconds the oldest due action aged meanwhile on the server's clock. The one it was: as
many due actions, no log row written since (Action Scheduler logs every action created,
started, finished or canceled), and an oldest due action that aged as much as the time
that passed (another one would be younger). All three come with the round's hot
statement (the due collector's columns, the log events collector's newest id): a renewal
sends nothing. A thousand stores whose backlogs wait cost a split each per scrape at
Prometheus' pace otherwise, doubling the database server's work and the exporter's
(docs/performance.md). What the check cannot see (an action deleted while another became
due, with no log row written between two scrapes, or a row changed by hand) is read again
about `RENEWED_AT_MOST` seconds after the split's last statement, each prefix at its own
point from 0.75 to 1.25 times it: at one point for all, a thousand stores whose splits
were first read in the exporter's first scrapes were all read again in the same three
scrapes five minutes later, and every five minutes after (1,000 statements instead of
about 90 in those scrapes of Prometheus' pace: docs/performance.md).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass

from actionscheduler_exporter.collectors.due import due_total, oldest_due_age
from actionscheduler_exporter.collectors.log_events.collector import newest_log_id
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import VALID_DATE_FLOOR, label_value, seconds
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.folding import fold, fold_oldest
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.cached_readings import stagger
from actionscheduler_exporter.sources.database import Collector, DatabaseContext
from actionscheduler_exporter.sources.source import Freshness, in_round_every
from actionscheduler_exporter.timing import Clock

# Seconds after the split's last statement that a backlog which looks unchanged is split
# again all the same (what `renewed` cannot see is that late at most), each prefix at its
# own point from 0.75 to 1.25 times it (`stagger`).
RENEWED_AT_MOST = 300.0
# Seconds the oldest due age may have grown more or less than the time that passed and
# still be the same action's: ages are whole seconds, and a store's answer may have been
# read up to half a second before its round took it (`db.read_ahead.MAX_AGE`).
AGE_SLACK = 2.0
# Each count's age, by the count's family.
_AGE_OF = {
    catalog.DUE_BY_GROUP: catalog.OLDEST_DUE_AGE_BY_GROUP,
    catalog.DUE_BY_HOOK: catalog.OLDEST_DUE_AGE_BY_HOOK,
}
# The time that passes, as the server's ages count it (not the site's clock, which tests
# move by minutes in an instant).
_elapsed = time.monotonic


@dataclass(frozen=True)
class _Backlog:
    """The due backlog as a round's hot statement saw it."""

    due: int  # every due action (the due collector's count)
    newest_log: int  # the newest log row's id
    age: float  # the oldest due action's age (the due collector's)
    seen_at: float  # when (`_elapsed`)


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
        # Per table prefix: the backlog its kept split was read from (as last renewed),
        # and the clock time until which it may be renewed.
        self._split_from: dict[str, tuple[_Backlog, float]] = {}

    def freshness(self, site: SiteConfig) -> Freshness:
        return in_round_every(site.due_split_interval)

    def cacheable(self, context: DatabaseContext) -> bool:
        """Nothing due is always current: neither served from nor kept for later."""
        return due_total(context.earlier.get("due")) != 0

    def read(self, context: DatabaseContext) -> Iterable[Sample]:
        if context.site.due_split_rows == 0:
            return ()
        # Seen before the split's statement: a change meanwhile shows at the next renewal.
        backlog = _backlog(context)
        samples = tuple(self._split(context, due_total(context.earlier.get("due"))))
        prefix = context.tables.prefix
        if backlog is None:
            self._split_from.pop(prefix, None)
        else:
            renewed_for = RENEWED_AT_MOST * stagger(context.site.name, prefix, self.name)
            self._split_from[prefix] = (backlog, self._clock() + renewed_for)
        return samples

    def renewed(
        self, kept: Sequence[Sample], context: DatabaseContext
    ) -> tuple[Sample, ...] | None:
        """The kept split with its ages brought up to date, when the backlog is the one it
        was read from and its statement is recent enough; None: read it again."""
        prefix = context.tables.prefix
        found = self._split_from.get(prefix)
        now = _backlog(context)
        if found is None or now is None:
            return None
        was, renewed_until = found
        if self._clock() >= renewed_until:
            return None
        aged = now.age - was.age
        if (now.due, now.newest_log) != (was.due, was.newest_log) or abs(
            aged - (now.seen_at - was.seen_at)
        ) > AGE_SLACK:
            return None
        self._split_from[prefix] = (now, renewed_until)
        if not aged:
            return tuple(kept)
        # Only the ages of what is due: a named group or hook with nothing due stays 0.
        due = {
            (_AGE_OF[item.metric], item.labels)
            for item in kept
            if item.metric in _AGE_OF and item.value > 0
        }
        return tuple(
            Sample(item.metric, max(0.0, item.value + aged), item.labels)
            if (item.metric, item.labels) in due
            else item
            for item in kept
        )

    def retain(self, prefixes: Collection[str]) -> None:
        for gone in self._split_from.keys() - set(prefixes):
            del self._split_from[gone]

    def _split(self, context: DatabaseContext, total_due: int | None) -> Iterator[Sample]:
        limit = context.site.due_split_rows
        rows = [] if total_due == 0 else context.query(*self._statement(context, limit))
        by_group: Counter[str] = Counter()
        by_hook: Counter[str] = Counter()
        age_by_group: dict[str, float] = {}
        age_by_hook: dict[str, float] = {}
        split = 0
        zero_dated = 0
        for slug, hook, count, age, zeros in rows:
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
        the oldest validly dated one, and how many are zero-dated."""
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
            f" SUM(scheduled_date_gmt < %s) AS zero_dated FROM ({oldest}) AS oldest"
            " GROUP BY group_id, hook"
        )
        # The slugs joined to the counts, not looked up apart: one round trip per scrape.
        return (
            "SELECT g.slug, c.hook, c.actions, c.age, c.zero_dated"
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


def _backlog(context: DatabaseContext) -> _Backlog | None:
    """The backlog as this round's hot statement saw it; None when it cannot tell (the due
    collector did not answer, the log's newest id was not in the statement)."""
    due = context.earlier.get("due")
    total, age, newest_log = due_total(due), oldest_due_age(due), newest_log_id(context)
    if total is None or age is None or newest_log is None:
        return None
    return _Backlog(total, newest_log, age, _elapsed())
