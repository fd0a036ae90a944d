"""The one contract every producer of samples follows, and what a reading of it is.

A source owns some metric families and knows how to read them: the database collectors
(one query set each), the log events collector, the Kubernetes workers, the site's settings. It
says nothing of its own success, duration, read time or errors: the round reads it through
`sources.reader.SourceReader`, which adds those in one place, whatever the source.

When a source is read is its `Freshness`, the one answer to that question: inside every
round; inside the round but at most every N seconds, its last reading served in between
(`cached`); in the background at most every N seconds (`background`); or once, from the
configuration (`constant`).
A source may keep state between readings (the log events collector's cursor), but changes it only
when a reading succeeds.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Sample

ContextT = TypeVar("ContextT", contravariant=True)


@dataclass(frozen=True)
class Freshness:
    """When a source is read.

    interval 0: inside every round. Above 0: in a thread of its own, at most every
    `interval` seconds; a scrape waits for a refresh (within its deadline) only when the
    source has no reading yet, or for every due refresh with `wait_each`. With
    `in_round`, inside the round but at most every `interval` seconds per table prefix,
    the last reading served in between (`sources.cached_readings`).
    `constant`: read once, from the configuration; it cannot fail and reports no health.
    """

    interval: float = 0.0
    wait_each: bool = False
    constant: bool = False
    in_round: bool = False

    @property
    def background(self) -> bool:
        return self.interval > 0 and not (self.constant or self.in_round)

    @property
    def cached(self) -> bool:
        """Read in the round, its last reading served until its interval passes."""
        return self.in_round and self.interval > 0


EVERY_ROUND = Freshness()
CONSTANT = Freshness(constant=True)


@functools.lru_cache(maxsize=256)
def in_round_every(interval: float) -> Freshness:
    """`Freshness(interval, in_round=True)`, made once per interval (asked in each round)."""
    return Freshness(interval, in_round=True)


class Source(ABC, Generic[ContextT]):
    """A group of metric families read together; `name` is its `collector` label."""

    name: ClassVar[str]
    metrics: ClassVar[tuple[MetricDef, ...]]
    # The counter its failures go to, and that counter's kinds (all exported from 0).
    error_metric: ClassVar[MetricDef] = catalog.ERRORS
    error_kinds: ClassVar[tuple[str, ...]] = catalog.ERROR_KINDS
    # A gauge of its own that repeats the reading's success (kubernetes_up), if any.
    up_metric: ClassVar[MetricDef | None] = None
    # The sources of the same round whose readings this one uses (by name): they run
    # before it, and their readings reach it in its context, not through shared state.
    needs: ClassVar[tuple[str, ...]] = ()
    # Whether its duration is written: not for a collector whose values come from the
    # round's one hot statement, whose time would be a share of that statement's (the
    # same number for each); every statement's time is in ..._database_seconds_total.
    reports_duration: ClassVar[bool] = True

    def freshness(self, site: SiteConfig) -> Freshness:
        """When the round reads this source for the site; by default in every round."""
        return EVERY_ROUND

    def cacheable(self, context: ContextT) -> bool:
        """For a source cached between rounds (`Freshness.cached`): whether its last
        reading may still be served, and whether this one may be cached. By default, until
        its interval passes."""
        return True

    @abstractmethod
    def read(self, context: ContextT) -> Iterable[Sample]:
        """The source's samples; raises SourceError when they cannot be read."""


# Slots, not frozen: a thousand sites' rounds make several of these per site, and a
# frozen one takes four times as long to make (`object.__setattr__` per field). A reading
# is never changed once made: `lengthened` and `failed` make new ones.
@dataclass(slots=True, unsafe_hash=True)
class Reading:
    """A source's latest reading: the values of its last success and how the last attempt
    went."""

    samples: tuple[Sample, ...] = ()
    ok: bool = False
    duration: float = 0.0
    read_at: float | None = None  # clock time of the last success; None: none yet
    problem: str = ""  # why the last attempt failed
    failure: str = ""  # its error kind (`SourceError.kind`)

    def lengthened(self, seconds: float) -> Reading:
        """This reading with `seconds` more to its duration (its share of a statement)."""
        return Reading(
            self.samples, self.ok, self.duration + seconds, self.read_at, self.problem,
            self.failure,
        )  # fmt: skip

    def failed(self, duration: float, problem: str, kind: str = "") -> Reading:
        """This reading after a failed attempt: the last good values stay, marked."""
        return Reading(self.samples, False, duration, self.read_at, problem, kind)


NOT_READ = Reading()
