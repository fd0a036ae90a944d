"""Where every source is read and reported: success, duration, read time and errors, once.

Whatever the source (a database collector in the round, the heavy tier's background
refresh, the Kubernetes API, the log events collector), its reading goes through `read`, which
times it and counts its failure, and is shown by `report`, which adds its health samples.
Problems are logged when they start and when they end, not on every scrape
(`problem_log.ProblemLog`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, TypeVar

from actionscheduler_exporter.errors import SourceError, unexpected
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Labels, Sample, labels_of, sample
from actionscheduler_exporter.sources.counters import SiteCounters
from actionscheduler_exporter.sources.problem_log import LogLine, ProblemLog
from actionscheduler_exporter.sources.source import NOT_READ, Reading, Source
from actionscheduler_exporter.timing import Clock

ContextT = TypeVar("ContextT")

# Seconds by which the wall clock may part from the monotonic one before read times are
# dated anew: NTP slews a clock by far less between two refreshes, and a clock set by
# hand (or a host resumed) moves by more.
CLOCKS_PART = 1.0


class SourceReader:
    def __init__(
        self,
        counters: SiteCounters,
        clock: Clock,
        problems: ProblemLog | None = None,
        *,
        wall_clock: Clock = time.time,
    ) -> None:
        """`problems`: the exporter's shared log of problems (one site's own otherwise).
        `clock` times the readings; `wall_clock` (Unix time) dates them for Prometheus."""
        self.counters = counters
        self.clock = clock
        self._wall_clock = wall_clock
        # The wall clock's time less `clock`'s, as `read_times` last took it.
        self._clocks_offset: float | None = None
        self._problems = problems or ProblemLog()
        # The sites with a problem now (the shared log's, changed in place): a reading of
        # a site that has none ends none, and need not ask (`recovered`).
        self.open_sites = self._problems.open_sites
        self._closed = False
        # The success sample of each source, made once per value (a thousand sites' round
        # reports ten of them per site), and each source's `collector` label.
        self._successes: dict[tuple[str, bool], Sample] = {}
        self._labels: dict[str, Labels] = {}

    @classmethod
    def of_site(cls, clock: Clock, problems: ProblemLog | None = None) -> SourceReader:
        """A site's reader, with counters of its own."""
        return cls(SiteCounters(), clock, problems)

    def read(
        self,
        source: Source[ContextT],
        context: ContextT,
        site: str,
        previous: Reading = NOT_READ,
    ) -> Reading:
        """Reads the source once. A failure is counted under `site` and keeps the previous
        reading's values, marked as failed (a source read in every round has none)."""
        started = self.clock()
        try:
            samples = tuple(source.read(context))
        except SourceError as error:
            return self._failed(source, site, previous, started, error)
        except Exception as error:
            # Rows of a type the schema does not allow (a damaged table, a killed statement):
            # the source fails, never the scrape. The values are not logged: they are data.
            failure = SourceError("malformed", f"the answer did not fit: {unexpected(error)}")
            return self._failed(source, site, previous, started, failure)
        finished = self.clock()
        if site in self.open_sites:
            self.recovered(site, source)
        return Reading(samples, True, finished - started, finished)

    def recovered(self, site: str, source: Source[Any]) -> None:
        """The source was read for `site`, which has a problem (`open_sites`): the
        source's ends, if it had one (logged)."""
        if not self._closed:
            self._problems.clear(
                f"{site}/{source.name}",
                lambda: LogLine.of("source recovered", site, source=source.name),
            )

    def failed(self, source: Source[ContextT], site: str, error: SourceError) -> Reading:
        """The source's reading that failed before it was read (its statement could not
        be sent): counted and logged as `read` does a failure."""
        return self._failed(source, site, NOT_READ, self.clock(), error)

    def _failed(
        self,
        source: Source[ContextT],
        site: str,
        previous: Reading,
        started: float,
        error: SourceError,
    ) -> Reading:
        self.count(site, source, error.kind)
        self._set_problem(
            f"{site}/{source.name}",
            LogLine.of("source failed", site, source=source.name, kind=error.kind,
                       error=error.message),
        )  # fmt: skip
        return previous.failed(self.clock() - started, error.message, error.kind)

    def count(self, site: str, source: Source[Any], kind: str) -> None:
        self.counters.add(site, source.error_metric, kind)

    def report(self, source: Source[Any], reading: Reading) -> list[Sample]:
        """The reading's values with the source's success and duration. A source read in
        the background adds when it was read (`read_times`), made once per reading by its
        caller, so that the sample stays the same between refreshes."""
        samples = [*reading.samples, self.success(source, reading.ok)]
        if source.reports_duration:
            duration = float(reading.duration)
            labels = self._labels.get(source.name) or self._label(source)
            samples.append(Sample(catalog.COLLECTOR_DURATION, duration, labels))
        if source.up_metric is not None:
            samples.append(sample(source.up_metric, reading.ok))
        return samples

    def success(self, source: Source[Any], ok: bool = True) -> Sample:
        """The source's success sample: made once per value."""
        key = (source.name, ok)
        found = self._successes.get(key)
        if found is None:
            found = self._successes[key] = sample(
                catalog.COLLECTOR_SUCCESS, ok, collector=source.name
            )
        return found

    def read_times(
        self, sources: Sequence[Source[Any]], readings: Sequence[Reading | None]
    ) -> list[Sample]:
        """The Unix time of each source's last success (none before its first), to the
        millisecond: its clock time of reading (`Reading.read_at`) dated by the wall
        clock, with the same difference between the two clocks until they part by more
        than `CLOCKS_PART` (a wall clock set, or drifted): a reading's time made again
        (the heavy tier's, at a refresh that failed) is then the same number."""
        offset = self._wall_clock() - self.clock()
        kept = self._clocks_offset
        if kept is None or abs(offset - kept) > CLOCKS_PART:
            self._clocks_offset = kept = offset
        return [
            Sample(
                catalog.COLLECTOR_LAST_SUCCESS,
                round(kept + reading.read_at, 3),
                self._label(source),
            )
            for source, reading in zip(sources, readings, strict=True)
            if reading is not None and reading.read_at is not None
        ]

    def _label(self, source: Source[Any]) -> Labels:
        """The source's `collector` label, made once (its health samples are made every
        round: a thousand sites' scrape made ten thousand of them through `sample`)."""
        labels = self._labels.get(source.name)
        if labels is None:
            labels = labels_of(catalog.COLLECTOR_LAST_SUCCESS, collector=source.name)
            self._labels[source.name] = labels
        return labels

    def error_samples(self, site: str, source: Source[Any]) -> tuple[Sample, ...]:
        return self.counters.samples(site, source.error_metric, source.error_kinds)

    def note(self, key: str, problem: LogLine | None) -> None:
        """Logs any other problem (None: none) when it changes."""
        self._set_problem(key, problem)

    def problem(self, site: str, problem: LogLine | None) -> None:
        """Logs a problem of the site as a whole (down, slow; None: none) when it changes."""
        if problem is None and site not in self._problems.open_sites:
            return  # none to end: every site's result says so at every scrape
        self._set_problem(site, problem, recovered=LogLine.of("site recovered", site))

    def close(self) -> None:
        """The site is gone: what a reading still in flight finds is no longer logged (a
        removed site's heavy tier's refresh failing on its dropped tables, after the site
        has left). A reading that is logging as the site closes may still end its line."""
        self._closed = True

    def _set_problem(
        self, key: str, problem: LogLine | None, *, recovered: LogLine | None = None
    ) -> None:
        if not self._closed:
            self._problems.set(key, problem, recovered=recovered)
