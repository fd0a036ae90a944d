"""What the serving process and a helper process tell each other, over the helper's
standard input and output: each message a pickle (both ends are this exporter, the
same version; nothing else writes to these pipes)."""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from typing import IO

from actionscheduler_exporter.config.model import ExporterConfig
from actionscheduler_exporter.exposition.family_parts import Gathering
from actionscheduler_exporter.metrics.samples import Labels
from actionscheduler_exporter.split.changes import Changes

# Sites by their `site` label and constant labels.
Sites = list[tuple[str, Labels]]


@dataclass(frozen=True)
class Configure:
    """Serve this configuration (already the helper's part) from the next scrape on."""

    config: ExporterConfig


@dataclass(frozen=True)
class Ask:
    """Scrape your sites with the scraper's `timeout`, counted from `sent_at` (the
    machine's monotonic clock), for an answer of `content_type`; `whole`: send the
    families whole, not as changes (`changes`)."""

    number: int
    timeout: float
    content_type: str
    sent_at: float
    whole: bool = False

    def timeout_left(self) -> float:
        """What is left of the timeout now (a helper started for this scrape, or one
        that read the question late, has less: its rounds end with the asker's)."""
        return self.timeout - (time.monotonic() - self.sent_at)


@dataclass(frozen=True)
class Answer:
    """The families of the helper's sites for the `Ask` of `number` (whole, or as
    changes to its answer before), and the sites themselves (their `site` label and
    constant labels): reported as down by the serving process if the helper stops."""

    number: int
    gathering: Gathering | Changes
    sites: Sites


Message = Configure | Ask | Answer


class ChannelClosedError(Exception):
    """The other end has gone (or sent something that is not a message)."""


def send(stream: IO[bytes], message: Message) -> None:
    pickle.dump(message, stream, protocol=pickle.HIGHEST_PROTOCOL)
    stream.flush()


def receive(stream: IO[bytes]) -> Message:
    try:
        message = pickle.load(stream)  # noqa: S301 - written by this exporter's own process
    except (EOFError, OSError, pickle.UnpicklingError, AttributeError, ValueError) as error:
        raise ChannelClosedError(str(error) or type(error).__name__) from None
    if not isinstance(message, Configure | Ask | Answer):
        raise ChannelClosedError(f"not a message: {type(message).__name__}")
    return message
