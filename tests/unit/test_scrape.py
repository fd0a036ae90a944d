"""The scrape without a server: how its time is spent, as absolute deadlines on the
exporter's clock, and rounds shared by the scrapes that join them."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from actionscheduler_exporter.config.model import ExporterConfig, KubernetesConfig, SiteConfig
from actionscheduler_exporter.rounds.report import RoundReports
from actionscheduler_exporter.scrape.budget import BudgetError, ScrapeBudget
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.scrape.pending import PendingScrape
from actionscheduler_exporter.scrape.single_flight import SingleFlight
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


def test_single_flight_shares_the_call_and_keeps_the_latest_deadline() -> None:
    release = threading.Event()
    seen: list[Deadline] = []

    def call(deadline: Deadline) -> int:
        seen.append(deadline)
        release.wait(10)
        return len(seen)

    with ThreadPoolExecutor(1) as executor:
        flight = SingleFlight(executor, call, FakeClock())
        first = flight.join(10.0)
        second = flight.join(20.0)
        third = flight.join(5.0)
        assert first is second is third
        release.set()
        assert first.result(10) == 1
        assert seen[0].at == 20.0  # extended by the later scraper, not shortened
        assert flight.join(1.0) is not first  # a new call once the first is done


class _AtOnce(Executor):
    """Runs each call as it is submitted: its future has ended before `submit` returns."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        done: Future[T] = Future()
        done.set_result(fn(*args, **kwargs))
        return done


T = TypeVar("T")


@pytest.mark.parametrize("at_once", [False, True])
def test_single_flight_lets_go_of_a_call_once_it_ended(at_once: bool) -> None:
    """Issue 40: an ended call holds its lock and its result; a thousand sites held one
    each between scrapes. Once ended it is let go of, also when it ended before `join`
    returned (its callback then runs in the caller's thread, outside the lock)."""
    with _AtOnce() if at_once else ThreadPoolExecutor(1) as executor:
        flight = SingleFlight(executor, lambda deadline: deadline.at, FakeClock())
        for runs_until in (1.0, 2.0, 3.0):
            call = flight.join(runs_until)
            assert call.result(10) == runs_until
            assert wait_until(lambda: flight._current is None, 10)


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

    async def settle(pending: PendingScrape, ending: list[Future[RoundReports]]) -> int:
        loop = asyncio.get_running_loop()
        wakeups = 0
        call_soon_threadsafe = loop.call_soon_threadsafe

        def counted(*arguments: Any) -> Any:
            nonlocal wakeups
            wakeups += 1
            return call_soon_threadsafe(*arguments)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]

        def end_all() -> None:
            for future in ending:
                future.set_result(RoundReports())

        settling = asyncio.create_task(pending.settled())
        await asyncio.sleep(0)  # one step of the loop: `settled` now waits
        ender = threading.Thread(target=end_all)
        ender.start()
        await asyncio.wait_for(settling, timeout=60)
        ender.join()
        return wakeups

    rounds: list[Future[RoundReports]] = [Future() for _ in range(200)]
    pending = PendingScrape(ScrapeBudget(10).start(FakeClock()), [], rounds, [])
    assert asyncio.run(settle(pending, rounds)) == 1
    assert all(future.done() for future in rounds)

    never: list[Future[RoundReports]] = [Future(), Future()]
    clock = FakeClock()
    pending = PendingScrape(ScrapeBudget(0.2).start(clock), [], never, [])
    assert pending.deadlines.rounds.left() < 1
    asyncio.run(settle(pending, never[:1]))  # returns at the deadline: one never ends
    assert not never[1].done()
