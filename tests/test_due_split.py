"""The due backlog per group and per hook (issue 15) against ground truth, as the queue
moves, folded, capped, and the groups' own alert thresholds."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from actionscheduler_exporter.collectors.due_split import RENEWED_AT_MOST
from actionscheduler_exporter.config.model import GroupConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.sources.cached_readings import stagger
from actionscheduler_exporter.timing import Deadline
from testbed import hot_sql
from testbed.schema import ZERO_DATE
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape, SiteFactory
from tests.support.clock import FakeClock
from tests.support.scenarios import AGE_SLACK, NASTY_HOOKS
from tests.support.truth import compute
from tests.support.waiting import wait_until

SiteScrape = Callable[..., SiteResult]


def series(result: SiteResult, metric: catalog.MetricDef, label: str) -> dict[str, float]:
    return {dict(s.labels)[label]: s.value for s in result.samples if s.metric is metric}


@pytest.fixture
def scrape_site(scrape: Scrape, site: SiteFactory) -> SiteScrape:
    def run(**settings: object) -> SiteResult:
        (result,) = scrape(site(**settings))
        assert result.up, result.problems
        return result

    return run


def assert_split_is_true(result: SiteResult, store: ActionSchedulerStore) -> None:
    truth = compute(store.connection)
    assert series(result, catalog.DUE_BY_GROUP, "group") == dict(truth.due_by_group)
    assert series(result, catalog.DUE_BY_HOOK, "hook") == dict(truth.due_by_hook)
    ages = series(result, catalog.OLDEST_DUE_AGE_BY_GROUP, "group")
    assert ages.keys() == truth.due_by_group.keys()
    for group, age in ages.items():
        assert age == pytest.approx(truth.oldest_due_age_by_group[group], abs=AGE_SLACK), group
    hook_ages = series(result, catalog.OLDEST_DUE_AGE_BY_HOOK, "hook")
    assert hook_ages.keys() == truth.due_by_hook.keys()
    for hook, age in hook_ages.items():
        assert age == pytest.approx(truth.oldest_due_age_by_hook[hook], abs=AGE_SLACK), hook
    assert result.value("actionscheduler_due_actions_unsplit") == 0


def test_the_split_follows_claims_runs_failures_resets_and_the_cleaner(
    store: ActionSchedulerStore, scrape_site: SiteScrape
) -> None:
    with store.seconds_ago(1800):
        for index in range(12):
            store.create("wc_export_report", group="reports", args=[index])
    with store.seconds_ago(600):
        for index in range(20):
            store.create("woocommerce_deliver_webhook_async", group="webhooks", args=[index])
        for index in range(3):
            store.create("woocommerce_cleanup_sessions", args=[index])  # no group
    assert_split_is_true(scrape_site(), store)

    claim = store.stake_claim(10)  # claimed actions are still due
    assert_split_is_true(scrape_site(), store)

    store.start(claim.action_ids[0])
    store.complete(claim.action_ids[0])
    store.start(claim.action_ids[1])
    store.fail(claim.action_ids[1], "boom")
    assert_split_is_true(scrape_site(), store)

    with store.seconds_ago(900):
        store.kill_worker_mid_batch(batch_size=8, finished=2)
    assert_split_is_true(scrape_site(), store)

    store.cleaner_reset()
    store.cleaner_mark_failed()
    assert_split_is_true(scrape_site(), store)

    store.run_batch(40)
    assert_split_is_true(scrape_site(), store)


def test_small_groups_and_hooks_fold_into_other_but_named_ones_stay(
    store: ActionSchedulerStore, scrape_site: SiteScrape
) -> None:
    sizes = {"big": 5, "middle": 3, "small": 2, "tiny": 1}
    for rank, (group, size) in enumerate(sizes.items()):
        with store.seconds_ago(3600 - 600 * rank):  # "tiny" is the newest, "big" the oldest
            for index in range(size):
                store.create(f"hook_{group}", group=group, args=[index])
    result = scrape_site(
        top_groups=2,
        top_hooks=1,
        groups=(GroupConfig("tiny"), GroupConfig("exports")),
        hooks=("hook_small",),
    )
    assert series(result, catalog.DUE_BY_GROUP, "group") == {
        "big": 5, "middle": 3, "tiny": 1, "exports": 0, "other": 2,
    }  # fmt: skip
    ages = series(result, catalog.OLDEST_DUE_AGE_BY_GROUP, "group")
    assert ages["exports"] == 0  # named, nothing due
    assert ages["other"] == pytest.approx(3600 - 600 * 2, abs=AGE_SLACK)  # "small"
    assert ages["big"] == pytest.approx(3600, abs=AGE_SLACK)
    assert series(result, catalog.DUE_BY_HOOK, "hook") == {
        "hook_big": 5, "hook_small": 2, "other": 4,
    }  # fmt: skip


def test_a_backlog_beyond_the_cap_is_split_from_its_oldest_and_counted_unsplit(
    store: ActionSchedulerStore, scrape_site: SiteScrape
) -> None:
    with store.seconds_ago(7200):
        for index in range(6):
            store.create("wc_export_report", group="reports", args=[index])
    with store.seconds_ago(60):
        for index in range(19):
            store.create("woocommerce_deliver_webhook_async", group="webhooks", args=[index])
    result = scrape_site(due_split_rows=10)
    assert series(result, catalog.DUE_BY_GROUP, "group") == {"reports": 6, "webhooks": 4}
    assert result.value("actionscheduler_due_actions_unsplit") == 15
    ages = series(result, catalog.OLDEST_DUE_AGE_BY_GROUP, "group")
    assert ages["reports"] == pytest.approx(7200, abs=AGE_SLACK)
    assert ages["webhooks"] == pytest.approx(60, abs=AGE_SLACK)

    off = scrape_site(due_split_rows=0)
    assert not series(off, catalog.DUE_BY_GROUP, "group")
    assert off.value("actionscheduler_due_actions_unsplit") is None


def test_zero_dated_actions_take_their_groups_age_from_the_log(
    store: ActionSchedulerStore, scrape_site: SiteScrape
) -> None:
    with store.seconds_ago(5400):
        store.create("wc_admin_async", group="imports", scheduled=ZERO_DATE)
    with store.seconds_ago(120):
        store.create("wc_admin_async", group="imports")
        store.create("woocommerce_deliver_webhook_async", group="webhooks")
    result = scrape_site()
    assert series(result, catalog.DUE_BY_GROUP, "group") == {"imports": 2, "webhooks": 1}
    ages = series(result, catalog.OLDEST_DUE_AGE_BY_GROUP, "group")
    assert ages["imports"] == pytest.approx(5400, abs=AGE_SLACK)
    assert ages["webhooks"] == pytest.approx(120, abs=AGE_SLACK)
    assert_split_is_true(result, store)


def test_groups_with_thresholds_of_their_own_export_them(
    store: ActionSchedulerStore, scrape_site: SiteScrape
) -> None:
    result = scrape_site(
        groups=(
            GroupConfig("reports", oldest_due_warning=7200.0, oldest_due_critical=43200.0),
            GroupConfig("imports", oldest_due_warning=1800.0),  # critical: the site's
            GroupConfig("webhooks"),  # kept as a series, no thresholds of its own
        )
    )
    warning = series(result, catalog.THRESHOLD_GROUP_OLDEST_DUE_WARNING, "group")
    critical = series(result, catalog.THRESHOLD_GROUP_OLDEST_DUE_CRITICAL, "group")
    assert warning == {"reports": 7200.0, "imports": 1800.0}
    assert critical == {"reports": 43200.0, "imports": 86400.0}


def test_with_nothing_due_the_split_sends_no_statement(
    store: ActionSchedulerStore, site: SiteFactory
) -> None:
    """Most scrapes of a healthy store find nothing due: the split then costs nothing, and
    beyond its cap it takes the due collector's total instead of counting again."""
    later = store.now().replace(year=store.now().year + 1)
    store.create("woocommerce_scheduled_subscription_payment", scheduled=later)
    quiet = hot_sql.hot_statements(site())
    assert not [sql for sql, _ in quiet if "AS oldest" in sql]
    for index in range(12):
        store.create("woocommerce_deliver_webhook_async", args=[index])
    busy = [sql for sql, _ in hot_sql.hot_statements(site(due_split_rows=10))]
    assert len([sql for sql in busy if "AS oldest" in sql]) == 1
    due_counts = [sql for sql in busy if "scheduled_date_gmt <= UTC_TIMESTAMP()" in sql]
    assert len(due_counts) == 2  # the due collector's and the split's: no third count


def test_a_split_interval_serves_the_last_reading_between_refreshes(
    store: ActionSchedulerStore, site: SiteFactory
) -> None:
    """due_split_interval: re-read at most every interval (here 60 s, staggered by at most
    a quarter), the last reading served in between; nothing due is always current."""
    clock = FakeClock()
    config = site(due_split_interval=60.0)
    session = hot_sql.RecordingSession(config)
    site_round = MonitoredSite(config, clock, session=session)

    def read(due_total: float) -> dict[str, float]:
        session.statements.clear()
        (result,) = site_round.finish(
            site_round.run(Deadline(clock() + 60, clock)), Deadline(clock(), clock)
        )
        assert result.value("actionscheduler_due_actions_unsplit") == 0
        due = (result.value("actionscheduler_due_actions", claim="unclaimed") or 0) + (
            result.value("actionscheduler_due_actions", claim="claimed") or 0
        )
        assert due == due_total
        return {
            dict(s.labels)["group"]: s.value
            for s in result.samples
            if s.metric is catalog.DUE_BY_GROUP
        }

    def sent() -> int:
        return len([sql for sql, _ in session.statements if "AS oldest" in sql])

    try:
        for index in range(3):
            store.create("wc_export_report", group="reports", args=[index])
        assert read(3) == {"reports": 3} and sent() == 1
        for index in range(2):
            store.create("wc_export_report", group="reports", args=[10 + index])
        clock.advance(40)  # within the interval's shortest stagger (45 s)
        assert read(5) == {"reports": 3} and sent() == 0
        clock.advance(40)  # past its longest (75 s)
        assert read(5) == {"reports": 5} and sent() == 1
        store.run_batch(10)
        assert read(0) == {} and sent() == 0  # nothing due: current, without a statement
        store.create("wc_export_report", group="reports", args=[99])
        assert read(1) == {"reports": 1} and sent() == 1  # a new backlog: split at once
    finally:
        site_round.close()


def test_an_unchanged_backlog_is_renewed_without_a_statement_and_its_ages_keep_growing(
    store: ActionSchedulerStore, site: SiteFactory
) -> None:
    """Past the interval, a backlog that is the one split (as many due, no log row since,
    an oldest that aged as much as the time that passed) is renewed: no statement, the
    counts as they were, the ages those a split read now finds; another oldest, a log row
    written since, or about RENEWED_AT_MOST since the last statement: read again."""
    clock = FakeClock()
    config = site(due_split_interval=60.0)
    session = hot_sql.RecordingSession(config)
    site_round = MonitoredSite(config, clock, session=session)

    def read() -> tuple[int, SiteResult]:
        session.statements.clear()
        (result,) = site_round.finish(
            site_round.run(Deadline(clock() + 60, clock)), Deadline(clock(), clock)
        )
        assert result.up, result.problems
        return len([sql for sql, _ in session.statements if "AS oldest" in sql]), result

    try:
        with store.seconds_ago(600):
            first = store.create("wc_export_report", group="reports", args=[1])
        with store.seconds_ago(300):
            store.create("woocommerce_deliver_webhook_async", group="webhooks", args=[2])
        with store.seconds_ago(200):
            store.create("wc_export_report", group="reports", args=[3])
        # Due in an hour; its "action created" stays the newest log row.
        later = store.create(
            "woocommerce_deliver_webhook_async",
            group="webhooks",
            scheduled=store.now() + dt.timedelta(hours=1),
        )
        sent, result = read()
        assert sent == 1
        assert_split_is_true(result, store)
        split_at = store.now()
        assert wait_until(lambda: (store.now() - split_at).total_seconds() >= 2, timeout=30)
        clock.advance(80)  # past the interval's longest stagger (75 s)
        sent, result = read()
        assert sent == 0  # renewed
        assert_split_is_true(result, store)  # its ages too: grown by the seconds since
        # As many due and no log row since, but another oldest: the oldest deleted (its
        # log rows with it), and the later action made due by a direct update.
        store.delete_action(first)
        store.reschedule(later, store.now() - dt.timedelta(seconds=100))
        clock.advance(80)
        sent, result = read()
        assert sent == 1
        assert_split_is_true(result, store)
        clock.advance(80)
        store.log(store.newest_action_id(), "a plugin's note")  # a log row since
        assert read()[0] == 1
        clock.advance(80)
        assert read()[0] == 0
        # However quiet, a split is read again about RENEWED_AT_MOST after its last
        # statement (this site's prefix at its own point of it).
        renewed_for = RENEWED_AT_MOST * stagger(config.name, config.table_prefix, "due_split")
        since = 80.0  # the renewal above
        while since + 80 < renewed_for:
            clock.advance(80)
            since += 80
            assert read()[0] == 0
        clock.advance(80)
        assert read()[0] == 1
    finally:
        site_round.close()


def test_splits_read_at_once_are_read_again_each_at_its_own_point(
    store: ActionSchedulerStore, site: SiteFactory
) -> None:
    """Sites whose splits were read at once (an exporter's first scrape) and whose
    backlogs do not move are read again each at its own point of RENEWED_AT_MOST (0.75
    to 1.25 times it), not all in the same scrape: here the two of forty names that come
    first and last."""
    factors = {f"shop-{n}": stagger(f"shop-{n}", "wp_", "due_split") for n in range(40)}
    early, late = min(factors, key=factors.__getitem__), max(factors, key=factors.__getitem__)
    assert RENEWED_AT_MOST * (factors[late] - factors[early]) > 80  # a step apart at least
    clock = FakeClock()
    sites = []
    for name in (early, late):
        config = site(name=name, due_split_interval=60.0)
        session = hot_sql.RecordingSession(config)
        sites.append((MonitoredSite(config, clock, session=session), session))

    def split_statements() -> list[int]:
        """Each site's split statements in a round of both."""
        sent = []
        for site_round, session in sites:
            session.statements.clear()
            (result,) = site_round.finish(
                site_round.run(Deadline(clock() + 60, clock)), Deadline(clock(), clock)
            )
            assert result.up, result.problems
            sent.append(len([sql for sql, _ in session.statements if "AS oldest" in sql]))
        return sent

    try:
        for index in range(3):
            store.create("wc_export_report", group="reports", args=[index])
        assert split_statements() == [1, 1]
        read_again = {early: 0.0, late: 0.0}
        since = 0.0
        while not all(read_again.values()):
            clock.advance(80)  # past the interval's longest stagger (75 s)
            since += 80
            for name, sent in zip((early, late), split_statements(), strict=True):
                due = not read_again[name] and since >= RENEWED_AT_MOST * factors[name]
                assert sent == (1 if due else 0), (name, since)
                if due:
                    read_again[name] = since
        assert read_again[early] < read_again[late]
    finally:
        for site_round, _ in sites:
            site_round.close()


def test_hostile_hook_names_are_split_intact(
    store: ActionSchedulerStore, scrape_site: SiteScrape
) -> None:
    for index, hook in enumerate(NASTY_HOOKS):
        store.create(hook, group=f"grp {index} ü", args=[index])
    result = scrape_site()
    assert series(result, catalog.DUE_BY_HOOK, "hook") == dict.fromkeys(NASTY_HOOKS, 1.0)
    assert set(series(result, catalog.DUE_BY_GROUP, "group")) == {
        f"grp {index} ü" for index in range(len(NASTY_HOOKS))
    }
    assert_split_is_true(result, store)
