"""The serving process's side of the split: its helper processes, asked at each scrape
for their sites' families, started again when one stops."""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as WaitTimeout
from dataclasses import dataclass

from actionscheduler_exporter.config.model import ExporterConfig
from actionscheduler_exporter.errors import unexpected
from actionscheduler_exporter.exposition.family_parts import Gathering
from actionscheduler_exporter.exposition.process import helper_ended, helper_started
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.rounds.result import SiteResult, down
from actionscheduler_exporter.scrape.budget import ScrapeBudget
from actionscheduler_exporter.split.changes import BaseMissingError, Changes, applied
from actionscheduler_exporter.split.channel import (
    Answer,
    Ask,
    ChannelClosedError,
    Configure,
    Message,
    Sites,
    receive,
    send,
)
from actionscheduler_exporter.split.parts import part_config, processes_of
from actionscheduler_exporter.timing import Clock, Deadline

log = logging.getLogger(__name__)

# A helper that stopped is started again at the next scrape, but not sooner than this
# after its last start (one that stops at once is not started at every scrape).
RESTART_AFTER_SECONDS = 5.0
# Seconds a helper has to leave once its input is closed, before it is killed.
STOP_WAIT_SECONDS = 5.0
# Scrapes in a row that a helper left unanswered, not even late, before it is taken for
# stuck and killed (then started again as one that stopped).
MOST_UNANSWERED = 3


class HelperStoppedError(Exception):
    """The helper process stopped before it answered."""


@dataclass
class _Running:
    """A started process, and what is to be written to it, in order, by its writer
    thread (a large configuration fills the pipe until the process reads it: the event
    loop that asks never waits for that). None closes its input."""

    process: subprocess.Popen[bytes]
    outbox: queue.SimpleQueue[Message | None]
    # Its last answer, whole, which its next one changes (`changes`), and its number.
    held: tuple[int, Gathering] | None = None
    # Its next answer is asked for whole: one did not apply to what was held.
    whole: bool = False


class Helper:
    """One helper process and its part of the sites (`parts.part_config`)."""

    def __init__(self, index: int, config: ExporterConfig, arguments: Sequence[str]) -> None:
        self.index = index
        self._config = config
        self._arguments = list(arguments)
        self._lock = threading.Lock()
        self._waiting: dict[int, Future[Gathering]] = {}
        self._running: _Running | None = None
        self._started = -RESTART_AFTER_SECONDS
        self._closed = False
        self._unanswered = 0  # scrapes in a row it has not answered in time, nor since
        self.stopped_with: str | None = None  # why the process last stopped
        # Those of its last answer; until it has answered, its configured sites (those
        # it finds, a network's subsites or a server's databases, are known from then).
        self.sites: Sites = configured_sites(config)
        self._answered = False
        self._start()

    @property
    def pid(self) -> int | None:
        running = self._running
        return None if running is None else running.process.pid

    def ask(
        self, number: int, timeout: float, content_type: str, sent_at: float
    ) -> Future[Gathering]:
        """Sends the scrape to the process (starting it again if it stopped); the
        future fails with `HelperStoppedError` if the process stops before it answers."""
        future: Future[Gathering] = Future()
        with self._lock:
            if self._running is None and not self._closed:
                self._start()
            running = self._running
            if running is None:
                future.set_exception(HelperStoppedError(self.stopped_with or "not running"))
                return future
            self._waiting[number] = future
            running.outbox.put(Ask(number, timeout, content_type, sent_at, running.whole))
            running.whole = False
        return future

    def forget(self, number: int) -> None:
        """Drops the wait for the answer to `number` (it did not come in time); a helper
        that has answered nothing since `MOST_UNANSWERED` such scrapes is killed."""
        with self._lock:
            self._waiting.pop(number, None)
            self._unanswered += 1
            stuck = self._unanswered >= MOST_UNANSWERED
            running = self._running
        if stuck and running is not None:
            emit(log, logging.ERROR, "a helper process answers no scrape; killed",
                 helper=self.index, unanswered=self._unanswered)  # fmt: skip
            running.process.kill()  # its reader sees it stop

    def configure(self, config: ExporterConfig) -> None:
        with self._lock:
            self._config = config  # a process started again starts with it
            if not self._answered:
                self.sites = configured_sites(config)
            if self._running is not None:
                self._running.outbox.put(Configure(config))

    def let_go(self) -> subprocess.Popen[bytes] | None:
        """Closes the process's input (it leaves), and starts it no more; the process,
        to be waited for (`_stop`)."""
        with self._lock:
            self._closed = True
            running, self._running = self._running, None
        if running is None:
            return None
        running.outbox.put(None)
        return running.process

    def _start(self) -> None:
        """Starts the process (under the lock), unless it started a short while ago; one
        that cannot be started (no memory, no process left) is told as a stopped one."""
        now = time.monotonic()
        if now - self._started < RESTART_AFTER_SECONDS:
            return
        self._started = now
        command = [sys.executable, "-m", "actionscheduler_exporter.split.helper"]
        try:
            process = subprocess.Popen(  # noqa: S603 - this interpreter, this package
                [*command, *self._arguments], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        except OSError as error:
            self.stopped_with = f"the helper process {self.index} could not start: {error}"
            emit(log, logging.ERROR, "a helper process could not start", helper=self.index,
                 error=str(error))  # fmt: skip
            return
        helper_started(process.pid)
        running = _Running(process, queue.SimpleQueue())
        running.outbox.put(Configure(self._config))
        self._running = running
        name = f"helper-{self.index}"
        threading.Thread(target=_write, args=(running,), name=f"{name}-in", daemon=True).start()
        threading.Thread(target=self._read, args=(running,), name=name, daemon=True).start()
        emit(log, logging.INFO, "helper process started", helper=self.index, pid=process.pid)

    def _read(self, running: _Running) -> None:
        """Hands each answer to its scrape, until the process stops; then fails the
        scrapes that wait for it, and lets the next scrape start it again."""
        why = "its output closed"
        try:
            why = self._answers(running)
        except Exception as error:  # whatever it was, the process is stopped below
            why = f"its answer could not be read: {unexpected(error)}"
        finally:
            running.outbox.put(None)  # its input closed: it leaves, or is killed in time
            _stop(running.process)
            helper_ended(running.process.pid)
            self._stopped(running, why)

    def _answers(self, running: _Running) -> str:
        """Reads the answers until the output closes; why it ended."""
        stdout = running.process.stdout
        assert stdout is not None  # asked for in `_start`
        while True:
            try:
                message = receive(stdout)
            except ChannelClosedError as error:
                return str(error) or "its output closed"
            if not isinstance(message, Answer):
                return f"it sent a {type(message).__name__} instead of an answer"
            with self._lock:
                self.sites, self._answered = message.sites, True
                self._unanswered = 0  # alive, if late
                future = self._waiting.pop(message.number, None)
                whole = _whole(running, message)
            if future is None:
                continue
            if whole is None:
                future.set_exception(HelperStoppedError(
                    f"the helper process {self.index} sent changes to an answer not "
                    "held here; its next answer is asked for whole"))  # fmt: skip
            else:
                future.set_result(whole)

    def _stopped(self, running: _Running, why: str) -> None:
        code = running.process.returncode
        stopped = f"the helper process {self.index} stopped (exit code {code}: {why})"
        with self._lock:
            waiting, self._waiting = self._waiting, {}
            self._unanswered = 0
            closing = self._closed
            if self._running is running:
                self._running = None
            self.stopped_with = stopped
        for future in waiting.values():
            future.set_exception(HelperStoppedError(stopped))
        if not closing:
            emit(log, logging.ERROR, "a helper process stopped; started again at a scrape",
                 helper=self.index, code=code, why=why)  # fmt: skip


def configured_sites(config: ExporterConfig) -> Sites:
    """The sites of `config` that its shard holds and that it names itself: not those a
    `database: auto` entry or a `table_prefix: auto` network finds."""
    return [
        (site.name, site.labels)
        for site in config.sites
        if not (site.discovers_databases or site.discovers_prefixes)
        and config.shard.owns(site.name)
    ]


def _whole(running: _Running, answer: Answer) -> Gathering | None:
    """The answer's families whole, applied to the last one held (then held in its
    place); None when they change an answer not held (the next is asked for whole)."""
    gathering = answer.gathering
    if isinstance(gathering, Changes):
        held = running.held
        try:
            if held is None or held[0] != gathering.base:
                raise BaseMissingError(f"changes to answer {gathering.base}, not held")
            gathering = applied(held[1], gathering)
        except BaseMissingError as error:
            emit(log, logging.ERROR, "a helper's answer could not be applied", error=str(error))
            running.held, running.whole = None, True
            return None
    running.held = (answer.number, gathering)
    return gathering


def _write(running: _Running) -> None:
    """Writes the messages to the process's input in order, until None or the process
    has gone (its reader then tells); a message that cannot be written stops it."""
    stdin = running.process.stdin
    assert stdin is not None  # asked for in `_start`
    try:
        while (message := running.outbox.get()) is not None:
            send(stdin, message)
    except (OSError, ValueError):
        pass  # it has gone
    except Exception as error:
        emit(log, logging.ERROR, "a message to a helper could not be written; stopped",
             error=unexpected(error))  # fmt: skip
        running.process.kill()
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Waits for it to leave (its input closed by its writer), and kills it if it has
    not left in time."""
    try:
        process.wait(STOP_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class AskedHelpers:
    """One scrape's question to every helper."""

    helpers: list[Helper]
    number: int
    futures: list[Future[Gathering]]
    until: Deadline

    @property
    def waiting(self) -> bool:
        return bool(self.futures)

    def answers(self) -> tuple[list[Gathering], list[SiteResult]]:
        """Each helper's families, waited for until the deadline; the sites of a helper
        that stopped or did not answer in time, reported as down (those of its last
        answer). Blocks: call it off the event loop."""
        gatherings: list[Gathering] = []
        missing: list[SiteResult] = []
        for helper, future in zip(self.helpers, self.futures, strict=True):
            try:
                gathering = future.result(self.until.left())
            except WaitTimeout:
                helper.forget(self.number)
                problem = f"the exporter's helper process {helper.index} did not answer in time"
            except HelperStoppedError as error:
                problem = str(error)
            else:
                gatherings.append(gathering)
                continue
            emit(log, logging.WARNING, "a helper's sites are reported as down",
                 helper=helper.index, sites=len(helper.sites), problem=problem)  # fmt: skip
            missing += [down(label, labels, problem) for label, labels in helper.sites]
        return gatherings, missing


class Helpers:
    """The helper processes of a configuration: `processes` minus the serving one."""

    def __init__(
        self, config: ExporterConfig, arguments: Sequence[str] = (), clock: Clock = time.monotonic
    ) -> None:
        self.processes = processes_of(config)
        self._clock = clock
        self._numbers = itertools.count()
        self.helpers = [
            Helper(index, part_config(config, index), arguments)
            for index in range(1, self.processes)
        ]

    def ask(self, budget: ScrapeBudget, content_type: str) -> AskedHelpers:
        """Sends the scrape to every helper; their answers are waited for until the
        budget's `helpers_wait`."""
        number = next(self._numbers)
        now = time.monotonic()  # the helpers' clock too (one per machine)
        until = Deadline(self._clock() + budget.helpers_wait, self._clock)
        futures = [helper.ask(number, budget.timeout, content_type, now) for helper in self.helpers]
        return AskedHelpers(self.helpers, number, futures, until)

    def sites_read(self) -> int:
        """The sites of the helpers' last answers."""
        return sum(len(helper.sites) for helper in self.helpers)

    def reconfigure(self, config: ExporterConfig) -> bool:
        """Passes each helper its part of `config`; False, changing nothing, when
        `config` needs another number of processes."""
        if processes_of(config) != self.processes:
            return False
        for helper in self.helpers:
            helper.configure(part_config(config, helper.index))
        return True

    def close(self) -> None:
        """Lets every helper go at once, then waits for them (each at most
        `STOP_WAIT_SECONDS`, together too)."""
        leaving = [helper.let_go() for helper in self.helpers]
        for process in leaving:
            if process is not None:
                _stop(process)


# One process, no helper.
NO_HELPERS = Helpers(ExporterConfig(sites=()))
