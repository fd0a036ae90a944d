"""A scrape in flight: the rounds it joined, waited for in one of two forms (blocking for
the `check` command and the tests, awaitable for the HTTP handler), then read once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import wait
from dataclasses import dataclass

from actionscheduler_exporter.errors import unexpected
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.scrape.budget import ScrapeDeadlines
from actionscheduler_exporter.scrape.lane_rounds import RoundsRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingScrape:
    deadlines: ScrapeDeadlines
    sites: list[MonitoredSite]
    rounds: list[RoundsRun]  # the run of each site's round, in the order of `sites`
    # Discovery entries that found no database (or could not list them yet).
    undiscovered: list[SiteResult]
    # Called once the results are assembled (the coordinator writes its problem log).
    finished: Callable[[], None] = lambda: None

    @property
    def results_may_wait(self) -> bool:
        """Whether `results` may wait for a site-wide source (the Kubernetes API)."""
        return any(site.results_may_wait for site in self.sites)

    def wait(self) -> None:
        """Blocks until every round ended or the rounds' deadline passed."""
        if self.rounds:
            runs = [run.finished for run in set(self.rounds)]
            wait(runs, timeout=self.deadlines.rounds.left())

    async def settled(self) -> None:
        """The same wait, on the event loop: it holds no thread, so any number of scrapes
        can wait on a shared round. The loop is woken once, by the last run to end (a
        future wrapped per round woke it per round: a thousand wake-ups, each a write to
        its pipe from a round's thread, in every scrape of a thousand sites)."""
        running = [run.finished for run in set(self.rounds) if not run.finished.done()]
        if not running:
            return
        loop = asyncio.get_running_loop()
        all_ended: asyncio.Future[None] = loop.create_future()
        left = len(running)
        lock = threading.Lock()

        def ended(_: object) -> None:
            nonlocal left
            with lock:
                left -= 1
                last = left == 0
            if last:
                with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                    loop.call_soon_threadsafe(_resolve, all_ended)

        for future in running:
            future.add_done_callback(ended)
        # The deadline resolves the same future (asyncio.wait takes twice the time).
        timer = loop.call_later(self.deadlines.rounds.left(), _resolve, all_ended)
        try:
            await all_ended
        finally:
            timer.cancel()

    def results(self) -> list[SiteResult]:
        """What the rounds found, through each site's one `finish`: a round still running
        gives what it has read so far. May wait for the site-wide sources (the Kubernetes
        API) until the rounds' deadline: call it off the event loop."""
        results: list[SiteResult] = list(self.undiscovered)
        for site, run in zip(self.sites, self.rounds, strict=True):
            results.extend(self._site_results(site, run))
        self.finished()
        return results

    def _site_results(self, site: MonitoredSite, run: RoundsRun) -> list[SiteResult]:
        """One site's results; whatever went wrong in its round stays that site's."""
        try:
            return site.finish(run.reports(site), self.deadlines.rounds)
        except Exception as error:
            emit(log, logging.ERROR, "the results of a site could not be assembled",
                 site=site.site.name, error=unexpected(error))  # fmt: skip
            return [site.broken(f"the results could not be assembled: {unexpected(error)}")]


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
