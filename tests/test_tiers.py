"""The heavy tier: refreshed in the background at most every heavy_interval, never inside a
scrape (but the first), never two at once, with its read time on show and its failures kept apart
from the hot tier."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pymysql
import pytest

from actionscheduler_exporter.collectors.due import DueCollector
from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.sources.database import Collector, DatabaseContext
from testbed.store import ActionSchedulerStore
from tests.support.clock import FakeClock
from tests.support.in_flight import InFlight
from tests.support.scenarios import zero_dates
from tests.support.waiting import wait_until

READ_AT = catalog.COLLECTOR_LAST_SUCCESS.name
FOLDED = catalog.FOLDED_LABEL_VALUES.name


class SleepingCollector(Collector):
    """A heavy collector whose query takes as long as the test says, on the real server."""

    name = "sleeping"
    tier = "heavy"
    metrics: ClassVar[tuple[catalog.MetricDef, ...]] = (catalog.FOLDED_LABEL_VALUES,)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.runs = 0
        self.statements = InFlight()  # its own, not the server's: another run may sleep too
        self._lock = threading.Lock()

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        with self._lock:
            self.runs += 1
            run = self.runs
        with self.statements.counted():
            context.query("SELECT SLEEP(%s)", (self.seconds,))
        yield sample(catalog.FOLDED_LABEL_VALUES, run, label="sleeping")


def coordinator_for(site: SiteConfig, *extra: Collector) -> Coordinator:
    return Coordinator(ExporterConfig(sites=(site,)), extra)


def test_heavy_values_are_served_between_refreshes_and_refreshed_after_the_interval(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    for index in range(3):
        store.run_action(
            store.create("woocommerce_deliver_webhook_async", args=[index]),
            outcome=lambda hook: "Supplier API unreachable",
        )
    coordinator = coordinator_for(site(heavy_interval=2.0))
    try:
        (first,) = coordinator.scrape()
        # The exporter's first scrape waits for the first refresh.
        assert first.value("actionscheduler_actions", status="failed") == 3
        assert first.value(READ_AT, collector="status") is not None

        store.run_action(
            store.create("woocommerce_deliver_webhook_async", args=[9]),
            outcome=lambda hook: "Supplier API unreachable",
        )
        (between,) = coordinator.scrape()
        assert between.value("actionscheduler_actions", status="failed") == 3
        # The hot tier saw the new action's log rows at once.
        assert (
            between.value(
                "actionscheduler_actions_failed",
                group="",
                reason="exception",
                hook="woocommerce_deliver_webhook_async",
            )
            == 1
        )

        def refreshed() -> bool:
            (result,) = coordinator.scrape()
            return result.value("actionscheduler_actions", status="failed") == 4

        assert wait_until(refreshed, 20)
        (after,) = coordinator.scrape()
        read_at = after.value(READ_AT, collector="status")
        assert read_at is not None
        assert read_at > (first.value(READ_AT, collector="status") or 0)
        assert time.time() - read_at < 2.0 + 1.0  # as fresh as the interval allows
        assert after.value("actionscheduler_exporter_heavy_interval_seconds") == 2.0
    finally:
        coordinator.close()


def test_between_refreshes_the_values_and_their_read_time_are_served_as_made(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """A thousand sites' rounds served each site's heavy samples again in every round:
    they are kept with the readings they were made of, their read time too (an age was
    made again in every round before)."""
    store.run_action(
        store.create("woocommerce_deliver_webhook_async"),
        outcome=lambda hook: "Supplier API unreachable",
    )
    coordinator = coordinator_for(site(heavy_interval=3600.0))
    try:
        (first,) = coordinator.scrape()
        made = [item for item in first.samples if _heavy_value(item)]
        assert first.value("actionscheduler_actions", status="failed") == 1
        read_at = first.value(READ_AT, collector="status")
        assert read_at is not None and read_at <= time.time()
        # A few milliseconds later on the wall clock: an age would have moved by then.
        assert wait_until(lambda: time.time() > read_at + 0.05, 5)
        (later,) = coordinator.scrape()
        assert later.value(READ_AT, collector="status") == read_at
        served = [item for item in later.samples if _heavy_value(item)]
        assert made and len(served) == len(made)
        # Each heavy collector's duration was made again in every round before.
        assert {dict(item.labels).get("collector") for item in made} >= _HEAVY
        assert all(a is b for a, b in zip(served, made, strict=True))
    finally:
        coordinator.close()


_HEAVY = {"status", "failures", "recurring", "retention"}


def _heavy_value(item: Sample) -> bool:
    """A heavy collector's value, health or read time."""
    if item.metric in (
        catalog.COLLECTOR_SUCCESS,
        catalog.COLLECTOR_DURATION,
        catalog.COLLECTOR_LAST_SUCCESS,
    ):
        return dict(item.labels)["collector"] in _HEAVY
    return item.metric.tier == "heavy"


def test_a_slow_refresh_neither_holds_scrapes_nor_runs_twice(
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
    connect: Callable[[], pymysql.connections.Connection[Any]],
) -> None:
    store.create("woocommerce_deliver_webhook_async")
    slow = SleepingCollector(seconds=3.0)
    coordinator = coordinator_for(site(heavy_interval=0.2, heavy_query_timeout=30.0), slow)
    try:
        # The first scrape gives up waiting at its deadline and serves the hot tier.
        (first,) = coordinator.scrape(timeout=1.0)
        assert first.up
        assert first.value("actionscheduler_due_actions", claim="unclaimed") == 1
        assert first.value(FOLDED, label="sleeping") is None  # the refresh is not done
        assert wait_until(lambda: slow.statements.now == 1, 10)

        # Scrapes while the refresh runs: each is answered, none starts a second refresh.
        answered = 0
        while slow.runs == 1 and answered < 200:
            (result,) = coordinator.scrape(timeout=1.0)
            answered += result.up
        assert answered >= 2 and slow.statements.most == 1

        # Once done, its value is served; the next refresh starts only after the interval.
        assert wait_until(
            lambda: coordinator.scrape()[0].value(FOLDED, label="sleeping") is not None, 20
        )
        for _ in range(10):
            coordinator.scrape()
        assert slow.statements.most == 1
    finally:
        coordinator.close()


def test_a_failing_refresh_keeps_the_last_values_and_says_so(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    store.create("woocommerce_deliver_webhook_async")
    sleeper = SleepingCollector(seconds=0.0)
    coordinator = coordinator_for(site(heavy_interval=0.2, heavy_query_timeout=1.0), sleeper)
    try:
        (first,) = coordinator.scrape()
        assert first.value(FOLDED, label="sleeping") == 1
        sleeper.seconds = 5.0  # from now on the server stops it at heavy_query_timeout

        def failed_once() -> bool:
            (result,) = coordinator.scrape()
            return (
                result.value("actionscheduler_exporter_collector_success", collector="sleeping")
                == 0
            )

        assert wait_until(failed_once, 30)
        (result,) = coordinator.scrape()
        assert result.up
        assert result.value(FOLDED, label="sleeping") == 1  # the last good value
        assert result.value("actionscheduler_exporter_collector_success", collector="status") == 1
        sleeping_read = result.value(READ_AT, collector="sleeping")
        status_read = result.value(READ_AT, collector="status")
        assert sleeping_read is not None and status_read is not None
        assert sleeping_read < status_read  # the last good values' time stays
        assert (result.value("actionscheduler_exporter_errors", kind="timeout") or 0) >= 1
    finally:
        coordinator.close()


def test_heavy_interval_zero_reads_the_heavy_tier_inside_every_scrape(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    coordinator = coordinator_for(site(heavy_interval=0))
    try:
        (before,) = coordinator.scrape()
        store.create("woocommerce_deliver_webhook_async")
        (after,) = coordinator.scrape()
        assert before.value("actionscheduler_actions", status="pending") == 0
        assert after.value("actionscheduler_actions", status="pending") == 1
        assert after.value(READ_AT, collector="status") is None
    finally:
        coordinator.close()


def test_a_down_site_serves_no_stale_heavy_values(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    store.create("woocommerce_deliver_webhook_async")
    coordinator = coordinator_for(site(heavy_interval=60.0))
    try:
        (up,) = coordinator.scrape()
        assert up.value("actionscheduler_actions", status="pending") == 1
        store.drop_tables()
        (down,) = coordinator.scrape()
        assert not down.up
        assert down.value("actionscheduler_actions", status="pending") is None
        assert not [item for item in down.samples if item.metric is catalog.COLLECTOR_LAST_SUCCESS]
    finally:
        coordinator.close()


# The hot collectors whose samples follow from their columns alone.
_REPEATABLE = (
    catalog.DUE_ACTIONS,
    catalog.OLDEST_DUE_AGE,
    catalog.ACTIVE_CLAIMS,
    catalog.CLAIM_ROWS,
    catalog.OLDEST_CLAIM_AGE,
    catalog.IN_PROGRESS,
    catalog.OLDEST_IN_PROGRESS_AGE,
)


def _repeatable(result: SiteResult) -> list[Sample]:
    return [item for item in result.samples if item.metric in _REPEATABLE]


def test_hot_values_that_stay_the_same_give_the_same_samples_and_changed_ones_new_ones(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """A quiet store's hot columns answer the same from one round to the next: the
    samples made of them are the same objects as last time (a small whole number's
    sample is made once: `metrics.samples.whole_sample`), which the writer finds
    unchanged at a glance; once a value changes, its collector's samples are made of the
    new values."""
    coordinator = coordinator_for(site(heavy_interval=3600.0))
    try:
        (first,) = coordinator.scrape()
        (second,) = coordinator.scrape()
        made, served = _repeatable(first), _repeatable(second)
        assert len(made) == 8 and len(served) == 8
        assert all(a is b for a, b in zip(served, made, strict=True))

        action = store.create("woocommerce_deliver_webhook_async")
        store.stake_claim()
        store.start(action)
        (running,) = coordinator.scrape()
        assert running.value(catalog.IN_PROGRESS.name) == 1
        assert running.value(catalog.ACTIVE_CLAIMS.name) == 1
        assert running.value(catalog.CLAIM_ROWS.name) == 1
        assert running.value(catalog.DUE_ACTIONS.name, claim="unclaimed") == 0

        store.complete(action)
        claimed = store.stake_claim()  # nothing due: an empty claim row, for a moment
        (done,) = coordinator.scrape()
        assert done.value(catalog.IN_PROGRESS.name) == 0
        assert done.value(catalog.ACTIVE_CLAIMS.name) == 0
        assert done.value(catalog.CLAIM_ROWS.name) == 2
        store.release_claim(claimed.claim_id)
        (released,) = coordinator.scrape()
        assert released.value(catalog.CLAIM_ROWS.name) == 1
    finally:
        coordinator.close()


def test_a_cached_reading_served_again_reports_the_same_samples_until_it_is_read_again(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """Issue 40: a cached collector's reading (the due split) is served as it is for its
    interval, and so are the samples reported of it (its success and duration): the same
    objects, which the writer finds unchanged at a glance, not made again per round.
    Once it is read again, the new reading's are reported."""
    clock = FakeClock()
    store.create("woocommerce_deliver_webhook_async")  # one due action: a split to read
    config = ExporterConfig(sites=(site(heavy_interval=3600.0),))
    coordinator = Coordinator(config, clock=clock)
    try:
        (first,) = coordinator.scrape()
        clock.advance(5.0)
        (second,) = coordinator.scrape()
        made, served = _health(first, "due_split"), _health(second, "due_split")
        assert len(made) == 2  # its success and its duration
        assert all(a is b for a, b in zip(served, made, strict=True))
        clock.advance(120.0)  # past its interval, however staggered
        store.create("woocommerce_run_product_export")  # the backlog moved: read again
        (third,) = coordinator.scrape()
        read_again = _health(third, "due_split")
        assert len(read_again) == 2 and read_again[1] is not made[1]
        assert third.value(catalog.COLLECTOR_SUCCESS.name, collector="due_split") == 1
        assert third.value(catalog.DUE_ACTIONS.name, claim="unclaimed") == 2
    finally:
        coordinator.close()


def _health(result: SiteResult, collector: str) -> list[Sample]:
    """A collector's success and duration samples, in that order."""
    health = (catalog.COLLECTOR_SUCCESS, catalog.COLLECTOR_DURATION)
    return [
        item
        for metric in health
        for item in result.samples
        if item.metric is metric and ("collector", collector) in item.labels
    ]


def test_the_pass_that_due_and_claims_share_shows_each_ones_change_at_the_next_scrape(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The active claims come in the pass the due collector's claimed due actions come
    from (`collectors.claimed`): a worker taking a claim on a store with nothing due
    changes the claims' values and not the due ones; an action coming due changes the
    due ones. Both collectors are read from their values at every scrape, each showing
    its own."""
    made = 0
    read = DueCollector.read

    def counted(collector: DueCollector, context: DatabaseContext) -> tuple[Sample, ...]:
        nonlocal made
        made += 1
        return read(collector, context)

    monkeypatch.setattr(DueCollector, "read", counted)
    store.create("woocommerce_deliver_webhook_async")
    store.start(store.stake_claim().action_ids[0])  # one claim running, nothing due
    coordinator = coordinator_for(site(heavy_interval=3600.0))
    try:
        coordinator.scrape()
        (first,) = coordinator.scrape()
        assert first.value(catalog.ACTIVE_CLAIMS.name) == 1
        store.create("woocommerce_run_product_export")
        store.start(store.stake_claim().action_ids[0])
        (claimed,) = coordinator.scrape()
        assert claimed.value(catalog.ACTIVE_CLAIMS.name) == 2
        assert claimed.value(catalog.DUE_ACTIONS.name, claim="unclaimed") == 0
        store.create("woocommerce_cleanup_sessions")
        (due,) = coordinator.scrape()
        assert due.value(catalog.DUE_ACTIONS.name, claim="unclaimed") == 1
        assert due.value(catalog.ACTIVE_CLAIMS.name) == 2
        assert made == 4  # one reading per scrape, of its values
    finally:
        coordinator.close()


def test_zero_dated_due_actions_age_is_read_again_in_every_round(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """The oldest due age of zero-dated actions comes from the log and grows with the
    clock: the due collector's values stay the same, and it is read again regardless."""
    zero_dates(store)
    coordinator = coordinator_for(site(heavy_interval=3600.0))
    try:
        (first,) = coordinator.scrape()
        age = first.value(catalog.OLDEST_DUE_AGE.name)
        assert age is not None and age > 7000

        def older() -> bool:
            (result,) = coordinator.scrape()
            return (result.value(catalog.OLDEST_DUE_AGE.name) or 0) > age

        assert wait_until(older, 20)
    finally:
        coordinator.close()
