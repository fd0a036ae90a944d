"""A helper process (`python -m actionscheduler_exporter.split.helper`): reads its part
of the sites whenever the serving process asks, and answers with their families,
written as that process writes its own (`exposition.render.gather`).

It stops when its standard input closes (the serving process stopped, or let it go);
the signals that stop or reload the exporter are the serving process's to act on."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import IO

from actionscheduler_exporter.errors import unexpected
from actionscheduler_exporter.exposition.family_parts import Gathering
from actionscheduler_exporter.exposition.render import gather
from actionscheduler_exporter.logs import configure, emit
from actionscheduler_exporter.scrape.budget import after_scrapes_in_flight
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.scrape.garbage import tune_garbage_collection
from actionscheduler_exporter.split.changes import changes
from actionscheduler_exporter.split.channel import (
    Answer,
    Ask,
    ChannelClosedError,
    Configure,
    receive,
    send,
)

log = logging.getLogger(__name__)


class Helper:
    """Answers each `Ask` on a thread of its own (a second scraper's scrape joins the
    rounds of the first, as in the serving process); the families are gathered one
    scrape at a time, as the serving process writes its answers one at a time."""

    def __init__(self, answers: IO[bytes]) -> None:
        self._answers = answers
        # Gathered and sent in one order: each answer changes the one sent before it.
        self._answering = threading.Lock()
        self._sent: tuple[int, str, Gathering] | None = None  # number, type, families
        self._coordinator: Coordinator | None = None

    def run(self, requests: IO[bytes]) -> None:
        try:
            while True:
                message = receive(requests)
                if isinstance(message, Configure):
                    self._configure(message)
                elif isinstance(message, Ask):
                    threading.Thread(target=self._answer, args=(message,), daemon=True).start()
        except ChannelClosedError:
            pass  # the serving process has gone or let this one go
        finally:
            if self._coordinator is not None:
                self._coordinator.close()

    def _configure(self, message: Configure) -> None:
        old = self._coordinator
        if old is not None and old.reconfigure(message.config):
            return
        self._coordinator = Coordinator(message.config)
        if old is not None:  # scrapes that took it finish with it first
            after_scrapes_in_flight(old.close)

    def _answer(self, ask: Ask) -> None:
        coordinator = self._coordinator
        if coordinator is None:  # the serving process configures before it asks
            return
        left = ask.timeout_left()
        if left <= 0:  # the scrape has been answered without this process's sites
            return
        try:
            results = coordinator.scrape(left)
            sites = [(result.label, result.labels) for result in results]
            with self._answering:
                gathering = gather(results, ask.content_type)
                sent, self._sent = self._sent, (ask.number, ask.content_type, gathering)
                if sent is None or sent[1] != ask.content_type or ask.whole:
                    answer = Answer(ask.number, gathering, sites)
                else:
                    answer = Answer(ask.number, changes(sent[2], gathering, sent[0]), sites)
                # The serving process may have gone: the input closes too.
                with contextlib.suppress(OSError, ValueError):
                    send(self._answers, answer)
        except Exception as error:
            emit(log, logging.ERROR, "a helper process could not answer a scrape",
                 error=unexpected(error))  # fmt: skip
            # The serving process reports this helper's sites after its wait.


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="actionscheduler-exporter helper")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", default="logfmt")
    args = parser.parse_args(argv)
    configure(args.log_level, args.log_format)
    for handled in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(handled, signal.SIG_IGN)
    # The answers go out on the standard output alone: whatever else writes there (a
    # stray print) goes to the standard error instead.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    tune_garbage_collection()
    Helper(answers).run(sys.stdin.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
