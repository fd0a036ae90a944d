"""The source contract: background refreshes and the one place that reports health, with
a clock the test moves (no sleeps)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable

import pytest

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.servers import RefreshQueue
from actionscheduler_exporter.errors import SourceError
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.background import BackgroundRefresh
from actionscheduler_exporter.sources.cached_readings import (
    CachedReadings,
    RepeatedReadings,
    stagger,
)
from actionscheduler_exporter.sources.counters import SiteCounters
from actionscheduler_exporter.sources.problem_log import LogLine, ProblemLog
from actionscheduler_exporter.sources.reader import SourceReader
from actionscheduler_exporter.sources.site_wide import SiteWideSource
from actionscheduler_exporter.sources.source import Freshness, Reading, Source
from actionscheduler_exporter.timing import Deadline
from tests.support.clock import FakeClock
from tests.support.in_flight import InFlight
from tests.support.waiting import wait_until


class Counting(Source[None]):
    """A background source whose readings the test releases one by one."""

    name = "counting"
    metrics = (catalog.WORKER_PODS,)
    error_metric = catalog.KUBERNETES_ERRORS
    error_kinds = catalog.KUBERNETES_ERROR_KINDS
    up_metric = catalog.KUBERNETES_UP

    def __init__(self, interval: float, wait_each: bool = False, held: bool = False) -> None:
        self.interval = interval
        self.wait_each = wait_each
        self.reads = 0
        self.fail_with: str | None = None
        # held: each reading waits for a permit the test releases, one reading per permit
        self.held = held
        self.permits = threading.Semaphore(0)
        self.readings = InFlight()

    def freshness(self, site: SiteConfig) -> Freshness:
        return Freshness(self.interval, wait_each=self.wait_each)

    def read(self, context: None) -> Iterable[Sample]:
        with self.readings.counted():
            if self.held:
                self.permits.acquire(timeout=10)
            self.reads += 1
            if self.fail_with:
                raise SourceError(self.fail_with, f"it failed ({self.fail_with})")
            return [sample(catalog.WORKER_PODS, self.reads, ready="true")]


def values(samples: list[Sample], metric: catalog.MetricDef) -> list[float]:
    return [item.value for item in samples if item.metric is metric]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# The wall clock's Unix time when the fake clock reads 0.
EPOCH = 1_800_000_000.0


def scheduled(source: Counting, clock: FakeClock) -> tuple[SiteWideSource[None], SourceReader]:
    reader = SourceReader(SiteCounters(), clock, wall_clock=lambda: EPOCH + clock())
    return SiteWideSource(source, None, SiteConfig(name="shop"), reader), reader


def test_a_reading_is_served_until_the_interval_passes(clock: FakeClock) -> None:
    source = Counting(interval=60)
    runner, _ = scheduled(source, clock)
    # No value yet: the first refresh is waited for.
    first = runner.samples(Deadline(clock() + 5, clock))
    assert values(first, catalog.WORKER_PODS) == [1]
    read_at = EPOCH + clock()
    assert values(first, catalog.COLLECTOR_LAST_SUCCESS) == [read_at]
    clock.now += 59
    later = runner.samples(Deadline(clock() + 5, clock))
    assert source.reads == 1
    # The same reading's time: the same sample, whatever the clocks read now.
    (dated,) = [item for item in later if item.metric is catalog.COLLECTOR_LAST_SUCCESS]
    assert dated.value == read_at
    assert dated in [item for item in first if item is dated]
    clock.now += 1
    # Due: a refresh starts; it is not waited for (a value exists).
    runner.samples(Deadline(clock() + 5, clock))
    assert wait_for(lambda: source.reads == 2)
    refreshed = runner.samples(Deadline(clock() + 5, clock))
    assert values(refreshed, catalog.COLLECTOR_LAST_SUCCESS) == [read_at + 60]


def test_a_read_time_stays_the_same_number_until_the_wall_clock_is_set(clock: FakeClock) -> None:
    """Dated again (the heavy tier dates its readings again at a refresh that failed), a
    reading's time is the same number while the two clocks keep their difference within
    `CLOCKS_PART` (the wall clock read microseconds apart moved a rounding), and follows
    the wall clock once it is set."""
    wall = [EPOCH + 0.0004]
    reader = SourceReader(SiteCounters(), clock, wall_clock=lambda: wall[0] + clock())
    source, reading = Counting(interval=60), Reading((), True, 0.1, clock())
    (first,) = reader.read_times((source,), (reading,))
    assert first.value == EPOCH + clock() + 0.0  # to the millisecond
    wall[0] = EPOCH + 0.0006  # drifted across a rounding
    clock.now += 30
    assert [item.value for item in reader.read_times((source,), (reading,))] == [first.value]
    wall[0] = EPOCH + 3600.0  # the wall clock set an hour on
    (moved,) = reader.read_times((source,), (reading,))
    assert moved.value == first.value + 3600
    assert reader.read_times((source,), (None,)) == []
    assert reader.read_times((source,), (Reading(),)) == []  # never read


def test_wait_each_waits_for_every_due_refresh(clock: FakeClock) -> None:
    source = Counting(interval=15, wait_each=True)
    runner, _ = scheduled(source, clock)
    runner.samples(Deadline(clock() + 5, clock))
    clock.now += 15
    assert values(runner.samples(Deadline(clock() + 5, clock)), catalog.WORKER_PODS) == [2]


def test_a_refresh_that_outlasts_the_budget_is_served_later_and_never_doubled(
    clock: FakeClock,
) -> None:
    source = Counting(interval=1, held=True)
    runner, _ = scheduled(source, clock)
    pending = runner.samples(Deadline(clock() + 0.01, clock))
    assert values(pending, catalog.COLLECTOR_SUCCESS) == [0]  # not read yet
    assert values(pending, catalog.KUBERNETES_UP) == [0]
    assert values(pending, catalog.WORKER_PODS) == []
    clock.now += 5
    # Due again, but the first is still running: no second.
    runner.samples(Deadline(clock() + 0.01, clock))
    assert wait_for(lambda: source.readings.now == 1)
    source.permits.release()  # the first reading ends; one due after it waits for a permit
    assert wait_for(
        lambda: values(runner.samples(Deadline(clock(), clock)), catalog.WORKER_PODS) == [1]
    )
    assert source.reads == 1
    assert source.readings.most == 1
    source.permits.release(2)  # let a refresh the polling started end


def test_a_failure_keeps_the_last_values_counts_its_kind_and_their_time(
    clock: FakeClock,
) -> None:
    source = Counting(interval=10, wait_each=True)
    runner, _ = scheduled(source, clock)
    read_at = EPOCH + clock()
    runner.samples(Deadline(clock() + 5, clock))
    source.fail_with = "forbidden"
    clock.now += 10
    failed = runner.samples(Deadline(clock() + 5, clock))
    assert values(failed, catalog.WORKER_PODS) == [1]  # the last good value
    assert values(failed, catalog.COLLECTOR_SUCCESS) == [0]
    assert values(failed, catalog.KUBERNETES_UP) == [0]
    assert values(failed, catalog.COLLECTOR_LAST_SUCCESS) == [read_at]  # 10 s old by now
    errors = {dict(s.labels)["kind"]: s.value for s in failed
              if s.metric is catalog.KUBERNETES_ERRORS}  # fmt: skip
    assert errors["forbidden"] == 1 and set(errors) == set(catalog.KUBERNETES_ERROR_KINDS)
    assert not [s for s in failed if s.metric is catalog.ERRORS]


def test_background_refresh_passes_the_previous_value(clock: FakeClock) -> None:
    seen: list[int | None] = []

    def refresh(previous: int | None) -> int:
        seen.append(previous)
        return (previous or 0) + 1

    background = BackgroundRefresh[int]("test", 5, refresh, clock)
    assert background.latest(5) == 1
    clock.now += 5
    background.latest(5)
    assert wait_for(lambda: background.latest(0) == 2)
    assert seen == [None, 1]


@pytest.mark.parametrize("queued", [False, True])
def test_an_ended_refresh_is_let_go_of(clock: FakeClock, queued: bool) -> None:
    """Issue 40: a refresh that ended holds neither its event nor its future (a thousand
    sites held 2,000 of each between scrapes), in a thread of its own or queued; the next
    one starts when it is due, as before."""
    queue = RefreshQueue("heavy-test", waited=1)
    try:
        background = BackgroundRefresh[int](
            "test", 5, lambda previous: (previous or 0) + 1, clock,
            executor=queue if queued else None,
        )  # fmt: skip
        assert background.latest(5) == 1
        assert wait_for(lambda: background._finished is None is background._queued)
        clock.now += 5
        background.latest(5)
        assert wait_for(lambda: background.latest(0) == 2)
        assert wait_for(lambda: background._finished is None is background._queued)
    finally:
        queue.shutdown(wait=True)


def wait_for(condition: Callable[[], bool]) -> bool:
    return wait_until(condition, 10)


def test_a_refresh_that_raises_keeps_the_last_value_and_runs_again(clock: FakeClock) -> None:
    calls: list[int] = []

    def refresh(previous: int | None) -> int:
        calls.append(1)
        if len(calls) == 2:
            raise ZeroDivisionError("a bug, not a reading's failure")
        return len(calls)

    background = BackgroundRefresh[int]("test", 10, refresh, clock, wait_each=True)
    assert background.latest(5) == 1
    clock.now += 10
    assert background.latest(5) == 1  # the failed refresh left the last value
    clock.now += 10
    assert background.latest(5) == 3


def test_a_first_refresh_queued_behind_other_sites_is_not_waited_for(clock: FakeClock) -> None:
    """One heavy thread per server: a thousand sites' first round would each wait for
    every refresh queued before its own. Behind as many as the queue lets be waited for
    (here none but its own), the first one is waited for."""
    queue = RefreshQueue("heavy-test", waited=1)
    release = threading.Event()
    try:
        slow = BackgroundRefresh[int]("slow", 60, lambda _: release.wait(30) and 1, clock,
                                      executor=queue)  # fmt: skip
        alone = slow.latest(0.0)  # starts the first site's refresh, which blocks the queue
        assert alone is None and queue.queued == 1
        behind = BackgroundRefresh[int]("behind", 60, lambda _: 2, clock, executor=queue)
        assert behind.latest(30.0) is None  # at once: its refresh waits behind the slow one
        assert queue.queued == 2
        release.set()
        wait_until(lambda: queue.queued == 0, 30)
        assert behind.latest(0.0) == 2
        own = BackgroundRefresh[int]("own", 60, lambda _: 3, clock, executor=queue)
        assert own.latest(30.0) == 3  # alone in the queue: waited for
    finally:
        release.set()
        queue.shutdown(wait=True)


def test_first_refreshes_are_not_waited_for_while_more_sites_than_connections_lack_one(
    clock: FakeClock,
) -> None:
    """The rounds of a thousand sites each waited for their own first refresh, which the
    queue's one thread had just started: the queue never grew, and the first scrape moved
    at that thread's pace (7.7 s for 1,000 databases). What counts is how many prefixes
    have no first value yet on the server: at most `waited`, the first refresh is waited
    for; more, not. A site that is dropped no longer counts."""
    queue = RefreshQueue("heavy-test", waited=2)
    release = threading.Event()
    try:

        def value_of(n: int) -> Callable[[int | None], int]:
            return lambda _: release.wait(30) and n

        sites = [
            BackgroundRefresh[int](f"site{n}", 60, value_of(n), clock, executor=queue)
            for n in range(3)
        ]
        assert queue.first_values_due == 3
        assert sites[0].latest(30.0) is None  # three sites lack a first value: not waited for
        release.set()
        assert wait_until(lambda: sites[0].peek() == 0, 30)
        assert queue.first_values_due == 2
        assert sites[1].latest(30.0) == 1  # two left, as many as may be waited for
        del sites[2]  # a site removed by a reload
        assert queue.first_values_due == 0
        release.clear()
        network = BackgroundRefresh[int]("network", 60, value_of(7), clock, executor=queue)
        assert network.latest(30.0, prefixes=3) is None  # one refresh of three subsites
        release.set()
        assert wait_until(lambda: network.peek() == 7, 30)
        assert queue.first_values_due == 0
        assert network.latest(30.0, prefixes=3) == 7
    finally:
        release.set()
        queue.shutdown(wait=True)


def test_a_closed_source_no_longer_counts_as_lacking_its_first_value(clock: FakeClock) -> None:
    """A site's heavy tier refreshes through a method of its own: a reference cycle, which
    only a garbage collection would break. Closing the site lets go of its count at once,
    so that the sites added after it still get their first refresh waited for."""
    queue = RefreshQueue("heavy-test", waited=1)

    class Owner:
        def __init__(self) -> None:
            self.refresh = BackgroundRefresh[int]("owned", 60, self.read, clock, executor=queue)

        def read(self, _: int | None) -> int:
            return 1

    try:
        owners = [Owner(), Owner()]
        assert queue.first_values_due == 2
        for owner in owners:
            owner.refresh.close()
        assert queue.first_values_due == 0
        assert Owner().refresh.latest(30.0) == 1  # alone: waited for
    finally:
        queue.shutdown(wait=True)


@pytest.mark.parametrize("closed", [False, True])
def test_a_closed_sites_reading_in_flight_logs_nothing(
    clock: FakeClock, caplog: pytest.LogCaptureFixture, closed: bool
) -> None:
    """A site dropped while its refresh is in flight (at a reload, or a test's site once
    its database is dropped) does not log that refresh's failure: the site has gone."""
    caplog.set_level(logging.INFO)
    source = Counting(interval=10, held=True)
    runner, reader = scheduled(source, clock)
    source.fail_with = "forbidden"
    started = runner.samples(Deadline(clock(), clock))  # started, not waited for
    assert values(started, catalog.WORKER_PODS) == []
    assert wait_until(lambda: source.readings.now == 1, 30)
    if closed:
        reader.close()
    source.permits.release()
    runner.samples(Deadline(clock() + 30, clock))  # waits for the refresh to finish
    failed = [record for record in caplog.records if record.getMessage() == "source failed"]
    assert len(failed) == (0 if closed else 1)


def test_cached_readings_forget_the_prefixes_a_round_no_longer_has(clock: FakeClock) -> None:
    """`retain` runs every round and looks only when the prefixes changed; a reading kept
    for a prefix outside the last retained ones makes the next `retain` look again."""
    cache = CachedReadings(clock)
    good = Reading((sample(catalog.UP, 1),), True, 0.1, clock())
    for prefix in ("wp_", "wp_2_"):
        cache.keep("shop", prefix, "status", 60, good)
    cache.retain(["wp_", "wp_2_"])
    assert cache.get("wp_", "status") is good and cache.get("wp_2_", "status") is good
    cache.retain(["wp_"])  # a subsite deleted
    assert cache.get("wp_2_", "status") is None and cache.get("wp_", "status") is good
    cache.keep("shop", "wp_3_", "status", 60, good)  # out of turn: not a round's prefix
    cache.retain(["wp_"])
    assert cache.get("wp_3_", "status") is None and cache.get("wp_", "status") is good
    cache.keep("shop", "wp_2_", "status", 60, good)
    cache.retain([])  # every subsite gone
    assert cache.get("wp_", "status") is None and cache.get("wp_2_", "status") is None


def test_a_cached_reading_is_served_for_its_interval_after_it_was_read(
    clock: FakeClock,
) -> None:
    """A reading made of a row read earlier (in another store's batch:
    `db.refresh_together`) is served its interval after that row was read, not after it
    was kept: never longer than its interval after its values were read."""
    cache = CachedReadings(clock)
    fresh_for = 60 * stagger("shop", "wp_", "anomalies")
    read_at = clock() - 20
    early = Reading((sample(catalog.ORPHANED_CLAIMS, 0),), True, 0.0, read_at)
    assert cache.keep("shop", "wp_", "anomalies", 60, early) == read_at + fresh_for
    clock.advance(fresh_for - 20 - 0.5)
    assert cache.get("wp_", "anomalies") is early
    clock.advance(1.0)
    assert cache.get("wp_", "anomalies") is None


def test_a_readings_copies_carry_every_field() -> None:
    """`Reading.failed` and `Reading.lengthened` name every field (faster than
    dataclasses.replace, asked per collector and round): a new field must be added there."""
    assert [f.name for f in dataclasses.fields(Reading)] == [
        "samples", "ok", "duration", "read_at", "problem", "failure",
    ]  # fmt: skip
    reading = Reading((sample(catalog.UP, 1),), True, 0.5, 7.0, "slow", "lock")
    assert reading.lengthened(0.25) == dataclasses.replace(reading, duration=0.75)


def test_a_dropped_repeated_reading_is_not_served() -> None:
    repeated = RepeatedReadings()
    kept = Reading((sample(catalog.DUE_UNSPLIT, 0),), True, 0.01, 5.0)
    repeated.keep("wp_", "due_split", kept, [*kept.samples])
    repeated.drop("wp_", "due_split")
    assert repeated.reported("wp_", "due_split", kept) is None


def test_a_cached_readings_samples_are_served_for_that_very_reading_only() -> None:
    repeated = RepeatedReadings()
    kept = Reading((sample(catalog.DUE_UNSPLIT, 0),), True, 0.01, 5.0)
    reported = [*kept.samples]
    assert repeated.reported("wp_", "due_split", kept) is None
    repeated.keep("wp_", "due_split", kept, reported)
    assert repeated.reported("wp_", "due_split", kept) is reported
    # An equal reading made anew (read again, renewed) is not the one kept.
    assert repeated.reported("wp_", "due_split", dataclasses.replace(kept)) is None
    assert repeated.reported("wp_2_", "due_split", kept) is None


def test_repeated_readings_of_prefixes_gone_are_forgotten_and_a_late_one_is_seen() -> None:
    repeated = RepeatedReadings()
    made = Reading((), True)
    for prefix in ("wp_", "wp_2_", "wp_3_"):
        repeated.keep(prefix, "due_split", made, [])
    repeated.retain(["wp_", "wp_3_"])
    assert repeated.reported("wp_2_", "due_split", made) is None
    assert repeated.reported("wp_3_", "due_split", made) is not None
    # A round that ran past its deadline keeps a reading of a prefix gone meanwhile:
    # the next retain, with the same prefixes, still forgets it.
    repeated.keep("wp_2_", "due_split", made, [])
    repeated.retain(["wp_", "wp_3_"])
    assert repeated.reported("wp_2_", "due_split", made) is None
    # The same list as the last retain (a site's one prefix, every round): not looked at
    # again, unless a late round kept a prefix it does not hold.
    prefixes = ["wp_"]
    repeated.retain(prefixes)
    repeated.keep("wp_", "due_split", made, [])
    repeated.retain(prefixes)
    assert repeated.reported("wp_", "due_split", made) is not None
    repeated.keep("wp_3_", "due_split", made, [])
    repeated.retain(prefixes)
    assert repeated.reported("wp_3_", "due_split", made) is None


def test_a_reader_logs_each_start_and_end_of_a_problem_whatever_other_sites_have(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Readings skip clearing a site's keys while the site has no problem (the shared
    log says which have one): a source that fails and recovers, and a site that goes
    down and comes back, each log both lines, beside a site that stays down; a healthy
    site's readings log nothing."""
    caplog.set_level(logging.INFO)
    problems = ProblemLog()
    reader = SourceReader(SiteCounters(), clock, problems)
    source = Counting(interval=10)
    reader.problem("other", LogLine.of("site down", "other", kind="connect"))
    reader.read(source, None, "healthy")
    reader.problem("healthy", None)
    source.fail_with = "forbidden"
    reader.read(source, None, "shop")
    source.fail_with = None
    reader.read(source, None, "shop")
    reader.read(source, None, "shop")
    reader.problem("shop", LogLine.of("site down", "shop", kind="connect"))
    reader.problem("shop", None)
    reader.problem("shop", None)
    assert [record.getMessage() for record in caplog.records] == [
        "site down",  # other's
        "source failed",
        "source recovered",
        "site down",
        "site recovered",
    ]
    assert problems.open_sites == {"other": 1}


def test_a_counters_samples_are_made_again_only_for_the_counts_that_changed() -> None:
    """Issue 40: a site's database time changes in every round, its errors rarely: the
    samples of the counts that stayed are the same objects (the writer skips them)."""
    counters = SiteCounters()
    kinds, tiers = ("connect", "query"), ("hot", "heavy")
    first = counters.samples("shop", catalog.DATABASE_SECONDS, tiers, label="tier")
    few = counters.samples("shop", catalog.ERRORS, kinds[:1])  # another shape, one metric
    errors = counters.samples("shop", catalog.ERRORS, kinds)
    assert [item.value for item in first] == [0.0, 0.0]
    counters.add("shop", catalog.DATABASE_SECONDS, "hot", 0.25)
    counters.add("shop", catalog.ERRORS, "connect")
    counters.add("other", catalog.ERRORS, "query")
    then = counters.samples("shop", catalog.DATABASE_SECONDS, tiers, label="tier")
    assert then[0].value == 0.25 and then[0].labels == first[0].labels
    assert then[1] is first[1]  # the heavy tier's time stayed
    assert counters.samples("shop", catalog.ERRORS, kinds[:1])[0].value == 1.0 != few[0].value
    now = counters.samples("shop", catalog.ERRORS, kinds)
    assert now[0].value == 1.0 and now[1] is errors[1]
    assert counters.samples("shop", catalog.ERRORS, kinds) is now  # nothing changed since
    assert counters.samples("other", catalog.ERRORS, kinds)[1].value == 1.0


def test_a_sites_counters_read_together_are_each_counters_samples_in_order() -> None:
    """`samples_of` (a site's errors and database time, at every scrape) gives what
    `samples` gives for each counter, one after the other, the same objects while the
    counts stay, and a count added since."""
    counters = SiteCounters()
    kinds, tiers = ("connect", "query"), ("hot", "heavy")
    wanted = ((catalog.ERRORS, kinds, "kind"), (catalog.DATABASE_SECONDS, tiers, "tier"))
    together = counters.samples_of("shop", wanted)
    apart = [
        *counters.samples("shop", catalog.ERRORS, kinds),
        *counters.samples("shop", catalog.DATABASE_SECONDS, tiers, label="tier"),
    ]
    assert [item is made for item, made in zip(together, apart, strict=True)] == [True] * 4
    assert [dict(item.labels) for item in together] == [
        {"kind": "connect"}, {"kind": "query"}, {"tier": "hot"}, {"tier": "heavy"}
    ]  # fmt: skip
    counters.add("shop", catalog.DATABASE_SECONDS, "hot", 0.5)
    counters.add("other", catalog.ERRORS, "query")
    then = counters.samples_of("shop", wanted)
    assert [item.value for item in then] == [0.0, 0.0, 0.5, 0.0]
    assert [item is made for item, made in zip(then, together, strict=True)] == [
        True, True, False, True
    ]  # fmt: skip
    assert counters.samples_of("shop", ()) == []
