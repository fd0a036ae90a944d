"""The rounds of one database server's sites, started a run at a time.

A scrape joins each site's round in flight (moving its deadline to the scrape's if that
is later) and starts one run for the sites whose rounds are not in flight: the run's
workers, at most the lane's connections on its threads, take its sites in order, a
round each, until the run's deadline; the sites not taken by then are let go of (not
reached), and a later scrape starts them anew. A run is one future and one work item
per worker: a future, its condition and a pool's work item per site were a tenth of a
thousand databases' scrape outside the rounds themselves (docs/performance.md).

A site stuck in its round (a lock wait) holds its worker and its run, never the other
sites: the next scrape joins it alone, and starts the others in a run of their own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Protocol

from actionscheduler_exporter.errors import unexpected
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.rounds.report import RoundReports
from actionscheduler_exporter.timing import Clock, Deadline

log = logging.getLogger(__name__)


class RoundSite(Protocol):
    """A site as a run reads it (`rounds.site.MonitoredSite`)."""

    @property
    def name(self) -> str: ...

    def run(self, deadline: Deadline) -> RoundReports: ...


class RoundsRun:
    """One run's sites, the reports of those whose round ended in it, and whether the run
    is over (every site's round ended, or let go of: at the deadline, or as the lane
    closes)."""

    def __init__(
        self,
        sites: Sequence[RoundSite],
        deadline: Deadline,
        ended: Callable[[RoundSite, RoundsRun], None],
    ) -> None:
        self.sites = sites
        self.deadline = deadline
        self.finished: Future[None] = Future()
        self._ended = ended  # tells the lane that a site's round is no longer this run's
        self._next = 0
        self._left = len(sites)
        self._reports: dict[RoundSite, RoundReports] = {}
        # The sites no worker will take, once the run stopped taking them.
        self._let_go: frozenset[RoundSite] = frozenset()
        self._lock = threading.Lock()

    def reports(self, site: RoundSite) -> RoundReports | None:
        """The site's reports once its round ended in this run; None while it runs, when
        it was let go of (not reached), or when its round broke (then its results show it
        as not reached, and count a deadline error)."""
        return self._reports.get(site)

    def work(self) -> None:
        """One worker: takes the run's next site until none is left, the deadline has
        passed, or the lane closed."""
        try:
            while (site := self._take()) is not None:
                reports = None
                try:
                    reports = site.run(self.deadline)
                except Exception as error:  # shown as not read; the others go on
                    emit(log, logging.ERROR, "a site's round stopped",
                         site=site.name, error=unexpected(error))  # fmt: skip
                finally:
                    self._end(site, reports)
        except BaseException:  # the process is stopping: no site waits for this worker
            self.let_go()
            raise

    def extend(self, at: float) -> frozenset[RoundSite]:
        """Moves the deadline to `at` if that is later, for a scrape that joins the run;
        returns the sites it let go of (none while it takes them), which that scrape
        must start anew."""
        with self._lock:
            self.deadline.extend(at)
            return self._let_go

    def let_go(self) -> None:
        """The sites no worker has taken are not read in this run."""
        self._take(stop=True)

    def _take(self, *, stop: bool = False) -> RoundSite | None:
        """The next site, or None; past the deadline (or told to `stop`) the sites not
        taken are let go of, decided under the lock that `extend` takes."""
        with self._lock:
            if self._next >= len(self.sites):
                return None
            if not (stop or self.deadline.passed()):
                self._next += 1
                return self.sites[self._next - 1]
            rest = self.sites[self._next :]
            self._next = len(self.sites)
            self._let_go = frozenset(rest)  # once: no site is taken after
        for site in rest:
            self._end(site, None)
        return None

    def _end(self, site: RoundSite, reports: RoundReports | None) -> None:
        if reports is not None:
            self._reports[site] = reports
        self._ended(site, self)
        with self._lock:
            self._left -= 1
            over = self._left == 0
        if over:
            self.finished.set_result(None)


class LaneRounds:
    """The runs of one server's lane: which run each site's round in flight is in."""

    def __init__(self, executor: Executor, workers: int, clock: Clock) -> None:
        self._executor = executor
        self._workers = workers
        self._clock = clock
        self._lock = threading.Lock()
        self._current: dict[RoundSite, RoundsRun] = {}
        self._closed = False
        self.joins = 0  # sites joined (or started) so far, over every scrape: diagnostics

    def join(self, sites: Sequence[RoundSite], runs_until: float) -> list[RoundsRun]:
        """Each site's run, in the order of `sites`: the run its round is in, its deadline
        moved to `runs_until` if that is later, or a new run of every site not in flight
        (nor let go of by the run it was in), with that deadline."""
        found: list[RoundsRun | None] = []
        new: list[RoundSite] = []
        # The runs joined, each extended once, with the sites it let go of.
        joined: dict[RoundsRun, frozenset[RoundSite]] = {}
        with self._lock:
            self.joins += len(sites)
            current = self._current
            for site in sites:
                run = current.get(site)
                if run is not None:
                    let_go = joined.get(run)
                    if let_go is None:
                        # Under the lane's lock: a site the run lets go of meanwhile stays
                        # in `current` until its end is told here, after this join.
                        let_go = joined[run] = run.extend(runs_until)
                    if site in let_go:
                        run = None
                if run is None:
                    new.append(site)
                found.append(run)
            if not new:
                return [run for run in found if run is not None]
            started = RoundsRun(new, Deadline(runs_until, self._clock), self._ended)
            for site in new:
                current[site] = started
        self._start(started, min(self._workers, len(new)))
        return [started if run is None else run for run in found]

    def close(self) -> None:
        """The lane is closing: the runs in flight take no further site, and the sites
        not taken are let go of (a round running ends as it will)."""
        with self._lock:
            self._closed = True
            runs = set(self._current.values())
        for run in runs:
            run.let_go()

    def _start(self, run: RoundsRun, workers: int) -> None:
        def gone(worker: Future[None]) -> None:
            if worker.cancelled():  # the lane is closing: its threads will not take it
                run.let_go()

        try:
            if self._closed:
                raise RuntimeError("the lane is closed")
            for _ in range(workers):
                self._executor.submit(run.work).add_done_callback(gone)
        except RuntimeError:  # shut down: no scrape may join a run that never runs
            run.let_go()
            raise

    def in_flight(self) -> int:
        """Sites whose round is in a run not over (diagnostics, tests)."""
        with self._lock:
            return len(self._current)

    def _ended(self, site: RoundSite, run: RoundsRun) -> None:
        with self._lock:
            if self._current.get(site) is run:
                del self._current[site]
