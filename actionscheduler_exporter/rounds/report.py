"""What a round has found out about one table prefix, recorded as the readings arrive.

A scrape that waits for the round to end and one that gives up before it read the same
report: `MonitoredSite.finish` turns it into a `SiteResult` in one way for both, reporting
every source not read by then as such.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from actionscheduler_exporter.metrics.samples import Sample

# A source's reading as a report records it: its name, its samples, its problem ("": none).
Recorded = tuple[str, list[Sample], str]


@dataclass(frozen=True)
class Failure:
    kind: str  # a catalog.ERROR_KINDS kind
    problem: str
    counted: bool = False  # already counted where it happened (a collector's error)


@dataclass
class PrefixReport:
    label: str
    started: float
    prefix: str = ""  # the table prefix ("" for a site whose prefixes are not known)
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    read: set[str] = field(default_factory=set)  # sources reported, by name
    failure: Failure | None = None  # the database did not answer (up 0)
    # The session's user may write, as its last connection told (None: not answered).
    can_write: bool | None = None
    heavy: list[Sample] | None = None  # the heavy tier's samples, once the round added them
    complete: bool = False  # the round is done with this prefix
    duration: float = 0.0  # seconds the round took for it, once complete
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, readings: Iterable[Recorded]) -> None:
        """Records the readings of sources (their name, samples and problem, "" for
        none), at once: a quiet store's are a few in microseconds, and a scrape that stops
        waiting sees all of them or none."""
        with self._lock:
            for source, samples, problem in readings:
                self.samples += samples
                self.read.add(source)
                if problem:
                    self.problems.append(problem)

    def add(self, samples: Iterable[Sample]) -> None:
        with self._lock:
            self.samples += samples

    def fail(self, failure: Failure) -> None:
        with self._lock:
            self.failure = failure

    def end(self, duration: float) -> None:
        with self._lock:
            self.complete = True
            self.duration = duration

    def add_heavy(self, samples: list[Sample], problems: list[str]) -> None:
        with self._lock:
            self.heavy = samples
            self.problems += problems

    def snapshot(self) -> PrefixReport:
        """A copy that the round in flight no longer changes."""
        with self._lock:
            return PrefixReport(
                self.label,
                self.started,
                self.prefix,
                list(self.samples),
                list(self.problems),
                set(self.read),
                self.failure,
                self.can_write,
                None if self.heavy is None else list(self.heavy),
                self.complete,
                self.duration,
            )


class RoundReports:
    """One round's reports by site label; shared by the round's threads and the scrapes
    that read them while it runs."""

    def __init__(self) -> None:
        self._reports: dict[str, PrefixReport] = {}
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """The round has ended: nothing changes its reports any more."""
        with self._lock:
            self._closed = True

    def put(self, report: PrefixReport) -> None:
        with self._lock:
            self._reports[report.label] = report

    def has(self, label: str) -> bool:
        with self._lock:
            return label in self._reports

    def get(self, label: str) -> PrefixReport:
        with self._lock:
            return self._reports[label]

    def answered(self) -> dict[str, str]:
        """The site labels of the prefixes whose database answered, by table prefix."""
        with self._lock:
            return {r.prefix: r.label for r in self._reports.values() if r.failure is None}

    def snapshot(self) -> dict[str, PrefixReport]:
        """The reports by site label, as copies that the round no longer changes while it
        runs; once it ended (`close`), the reports themselves, which the caller must not
        change either (a thousand stores' copies were 2 % of the exporter's time)."""
        with self._lock:
            if self._closed:
                return dict(self._reports)
            reports = list(self._reports.items())
        return {label: report.snapshot() for label, report in reports}
