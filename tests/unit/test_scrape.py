"""The scrape without a server: how its time is spent, as absolute deadlines on the
exporter's clock, and rounds shared by the scrapes that join them."""

from __future__ import annotations

import asyncio
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from actionscheduler_exporter.config.model import ExporterConfig, KubernetesConfig, SiteConfig
from actionscheduler_exporter.rounds.report import RoundReports
from actionscheduler_exporter.scrape.budget import BudgetError, ScrapeBudget
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.scrape.lane_rounds import LaneRounds, RoundSite, RoundsRun
from actionscheduler_exporter.scrape.pending import PendingScrape
from actionscheduler_exporter.timing import Deadline
from tests.support.clock import FakeClock
from tests.support.waiting import wait_until


def test_how_a_ten_second_scrape_is_spent() -> None:
    assert ScrapeBudget(10).plan() == pytest.approx(
        {
            "timeout": 10,
            "answer_by": 9.5,  # half a second for the answer to travel
            "rounds_wait": 8.55,  # the rounds are waited for...
            "writing": 0.95,  # ...keeping a tenth to write the answer
            "helpers_wait": 9.025,  # the helper processes' families: half of that tenth
            "discovery_wait": 4.75,
            "round_runs_for": 9.5,
        }
    )
    # A tiny timeout answers in time, but a round it starts still runs its minimum.
    assert ScrapeBudget(0.2).answer_by == pytest.approx(0.1)
    assert ScrapeBudget(0.2).round_runs_for == 9.5


@pytest.mark.parametrize(
    ("header", "problem"),
    [("ten", "must be a number"), ("-1", "must be positive"), ("nan", "must be positive")],
)
def test_a_bad_timeout_header_is_named(header: str, problem: str) -> None:
    with pytest.raises(BudgetError, match=problem):
        ScrapeBudget.from_header(header)


@pytest.mark.parametrize("header", ["1e10", "inf", "9e15"])
def test_a_huge_timeout_header_is_capped_not_an_overflow(header: str) -> None:
    budget = ScrapeBudget.from_header(header)
    assert budget.timeout == 600
    assert math.isfinite(budget.rounds_wait)


def test_the_budget_issues_absolute_deadlines_on_the_injected_clock() -> None:
    clock = FakeClock()
    clock.now = 1000.0
    deadlines = ScrapeBudget(10).start(clock)
    assert deadlines.started == 1000.0
    assert deadlines.answer.at == pytest.approx(1009.5)
    assert deadlines.rounds.at == pytest.approx(1008.55)
    assert deadlines.discovery.at == pytest.approx(1004.75)
    assert deadlines.round_runs_until == pytest.approx(1009.5)
    clock.now += 8.0
    assert deadlines.rounds.left() == pytest.approx(0.55)
    assert not deadlines.rounds.passed()
    clock.now += 1.0
    assert deadlines.rounds.left() == 0 and deadlines.rounds.passed()


class _Site:
    """A site as a run reads it: its round records where and when it ran, waits for
    `release` when given one, and moves `clock` on or breaks when told to."""

    def __init__(
        self,
        name: str,
        ran: list[tuple[str, str, float]],
        *,
        release: threading.Event | None = None,
        clock: FakeClock | None = None,
        breaks: bool = False,
    ) -> None:
        self.name, self._ran, self._release = name, ran, release
        self._clock, self._breaks = clock, breaks
        self.started = threading.Event()

    def run(self, deadline: Deadline) -> RoundReports:
        self.started.set()
        self._ran.append((self.name, threading.current_thread().name, deadline.at))
        if self._release is not None:
            assert self._release.wait(30)
        if self._clock is not None:
            self._clock.advance(60.0)
        if self._breaks:
            raise RuntimeError("a round that broke")
        return RoundReports()


def test_a_run_reads_its_sites_in_order_on_at_most_the_lanes_connections() -> None:
    """Issue 40: a scrape's rounds of one server are one run (one future, a work item per
    worker), not a future and a work item per site."""
    ran: list[tuple[str, str, float]] = []
    sites = [_Site(f"shop-{number}", ran) for number in range(12)]
    with ThreadPoolExecutor(4, thread_name_prefix="round") as executor:
        lane = LaneRounds(executor, 2, FakeClock(0.0))
        runs = lane.join(sites, 10.0)
        (run,) = set(runs)
        run.finished.result(30)
    assert [name for name, _, _ in ran] == [site.name for site in sites]
    assert len({thread for _, thread, _ in ran}) <= 2
    assert all(isinstance(run.reports(site), RoundReports) for site in sites)
    assert lane.in_flight() == 0 and lane.joins == 12  # an ended run is let go of


def test_a_scrape_joins_the_rounds_in_flight_and_starts_the_others_in_a_run_of_their_own() -> None:
    """A site stuck in its round (a lock wait) holds its run, not its neighbours: the
    next scrape joins its round, its deadline moved on, and reads the others anew."""
    ran: list[tuple[str, str, float]] = []
    release = threading.Event()
    stuck, quick = _Site("stuck", ran, release=release), _Site("quick", ran)
    with ThreadPoolExecutor(2) as executor:
        lane = LaneRounds(executor, 2, FakeClock(0.0))
        first = lane.join([stuck, quick], 10.0)
        assert stuck.started.wait(30)
        assert wait_until(lambda: first[1].reports(quick) is not None, 30)
        second = lane.join([stuck, quick], 20.0)
        assert second[0] is first[0] and second[1] is not first[1]
        assert second[1].finished.result(30) is None
        assert not first[0].finished.done() and lane.in_flight() == 1
        release.set()
        first[0].finished.result(30)
        third = lane.join([stuck], 30.0)
        third[0].finished.result(30)
    assert first[0].deadline.at == 20.0  # moved on by the later scrape, never shortened
    assert [(name, at) for name, _, at in ran] == [
        ("stuck", 10.0), ("quick", 10.0), ("quick", 20.0), ("stuck", 30.0)
    ]  # fmt: skip
    assert third[0] is not first[0] and lane.in_flight() == 0


def test_sites_not_taken_by_the_runs_deadline_are_let_go_of_and_read_by_the_next() -> None:
    ran: list[tuple[str, str, float]] = []
    clock = FakeClock()
    late = _Site("late", ran, clock=clock)  # its round ends past the run's deadline
    rest = [_Site("first", ran), _Site("second", ran)]
    with ThreadPoolExecutor(1) as executor:
        lane = LaneRounds(executor, 1, clock)
        (run,) = set(lane.join([late, *rest], clock() + 30.0))
        run.finished.result(30)
        assert run.reports(late) is not None
        assert all(run.reports(site) is None for site in rest)  # not reached
        assert lane.in_flight() == 0
        (again,) = set(lane.join(rest, clock() + 30.0))
        again.finished.result(30)
    assert [name for name, _, _ in ran] == ["late", "first", "second"]
    assert all(again.reports(site) is not None for site in rest)


def test_a_round_that_breaks_ends_its_site_alone(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[tuple[str, str, float]] = []
    broken, fine = _Site("broken", ran, breaks=True), _Site("fine", ran)
    with ThreadPoolExecutor(1) as executor:
        lane = LaneRounds(executor, 1, FakeClock(0.0))
        (run,) = set(lane.join([broken, fine], 10.0))
        run.finished.result(30)
    assert run.reports(broken) is None and run.reports(fine) is not None
    assert lane.in_flight() == 0
    (line,) = [record for record in caplog.records if record.levelname == "ERROR"]
    assert line.getMessage() == "a site's round stopped"


def test_sites_a_run_lets_go_of_as_a_scrape_joins_it_are_started_by_that_scrape() -> None:
    """A run past its deadline lets go of the sites it has not taken; a scrape that joins
    it meanwhile (before the lane is told) starts them anew rather than joining a run
    that will not read them."""
    ran: list[tuple[str, str, float]] = []
    clock = FakeClock(0.0)
    release, telling, told = threading.Event(), threading.Event(), threading.Event()
    busy, first, second = _Site("busy", ran, release=release), _Site("a", ran), _Site("b", ran)

    class Held(LaneRounds):
        def _ended(self, site: RoundSite, run: RoundsRun) -> None:
            if site is first and not told.is_set():
                telling.set()
                assert told.wait(30)
            super()._ended(site, run)

    with ThreadPoolExecutor(1) as executor:
        lane = Held(executor, 1, clock)
        lane.join([busy], 10.0)
        assert busy.started.wait(30)
        (late, _) = lane.join([first, second], 10.0)
        clock.advance(20.0)  # its deadline passes before its worker starts
        release.set()
        assert telling.wait(30)  # letting go of both, the lane not told yet
        again = lane.join([first, second], 60.0)
        assert again[0] is again[1] is not late
        told.set()
        again[0].finished.result(30)
        late.finished.result(30)
    assert [name for name, _, _ in ran] == ["busy", "a", "b"]
    assert late.reports(first) is None and again[0].reports(first) is not None
    assert lane.in_flight() == 0


def test_a_closed_lane_takes_no_further_site() -> None:
    """The coordinator closes its lanes as the process stops: a round running ends as it
    will, the sites not taken are not read (nor connected to)."""
    ran: list[tuple[str, str, float]] = []
    release = threading.Event()
    busy, waiting = _Site("busy", ran, release=release), _Site("waiting", ran)
    with ThreadPoolExecutor(1) as executor:
        lane = LaneRounds(executor, 1, FakeClock(0.0))
        (run, _) = lane.join([busy, waiting], 10.0)
        assert busy.started.wait(30)
        lane.close()
        release.set()
        run.finished.result(30)
        assert run.reports(busy) is not None and run.reports(waiting) is None
        with pytest.raises(RuntimeError):
            lane.join([waiting], 20.0)
    assert [name for name, _, _ in ran] == ["busy"] and lane.in_flight() == 0


def test_a_run_whose_workers_a_closing_lane_cancelled_is_let_go_of() -> None:
    """No later scrape may join a run that will never run: its sites end unread."""
    ran: list[tuple[str, str, float]] = []
    release = threading.Event()
    busy, waiting = _Site("busy", ran, release=release), _Site("waiting", ran)
    executor = ThreadPoolExecutor(1)
    lane = LaneRounds(executor, 1, FakeClock(0.0))
    (first,) = lane.join([busy], 10.0)
    assert busy.started.wait(30)
    (second,) = lane.join([waiting], 10.0)
    executor.shutdown(wait=False, cancel_futures=True)
    assert second.finished.result(30) is None and second.reports(waiting) is None
    release.set()
    first.finished.result(30)
    assert lane.in_flight() == 0 and [name for name, _, _ in ran] == ["busy"]
    with pytest.raises(RuntimeError):
        lane.join([waiting], 20.0)
    assert lane.in_flight() == 0


def test_the_handler_hands_off_to_threads_only_what_may_wait() -> None:
    """A scrape of sites without a database listing to wait for or a Kubernetes API to
    ask runs on the event loop, without two thread hand-offs (web/app.py)."""
    plain = SiteConfig(name="shop", database="wp")
    with_workers = SiteConfig(
        name="pods", database="wp", kubernetes=KubernetesConfig(namespace="shop", selector="a=w")
    )
    listed = SiteConfig(name="fleet", database="auto")
    coordinator = Coordinator(ExporterConfig(sites=(plain,)))
    try:
        assert not coordinator.begin_may_wait
        assert [site.results_may_wait for site in coordinator.sites] == [False]
    finally:
        coordinator.close()
    coordinator = Coordinator(ExporterConfig(sites=(plain, with_workers, listed)))
    try:
        assert coordinator.begin_may_wait  # the first listing of databases
        waits = {site.site.name: site.results_may_wait for site in coordinator.sites}
        assert waits == {"shop": False, "pods": True}
    finally:
        coordinator.close()


def test_the_loop_is_woken_once_when_the_last_round_ends() -> None:
    """`settled` returns when every round has ended, woken by the last one alone (a
    future wrapped per round woke the event loop once per site: a thousand writes to its
    pipe from the rounds' threads in every scrape of a thousand sites), and at the rounds'
    deadline when a round never ends."""

    async def settle(pending: PendingScrape, ending: list[RoundsRun]) -> int:
        loop = asyncio.get_running_loop()
        wakeups = 0
        call_soon_threadsafe = loop.call_soon_threadsafe

        def counted(*arguments: Any) -> Any:
            nonlocal wakeups
            wakeups += 1
            return call_soon_threadsafe(*arguments)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]

        def end_all() -> None:
            for run in ending:
                run.finished.set_result(None)

        settling = asyncio.create_task(pending.settled())
        await asyncio.sleep(0)  # one step of the loop: `settled` now waits
        ender = threading.Thread(target=end_all)
        ender.start()
        await asyncio.wait_for(settling, timeout=60)
        ender.join()
        return wakeups

    rounds = [_run() for _ in range(200)]
    pending = PendingScrape(ScrapeBudget(10).start(FakeClock()), [], rounds, [])
    assert asyncio.run(settle(pending, rounds)) == 1
    assert all(run.finished.done() for run in rounds)

    never = [_run(), _run()]
    clock = FakeClock()
    pending = PendingScrape(ScrapeBudget(0.2).start(clock), [], never, [])
    assert pending.deadlines.rounds.left() < 1
    asyncio.run(settle(pending, never[:1]))  # returns at the deadline: one never ends
    assert not never[1].finished.done()


def _run() -> RoundsRun:
    """A run of no site, ended by the test (`finished`)."""
    return RoundsRun([], Deadline(0.0, FakeClock()), lambda site, run: None)
