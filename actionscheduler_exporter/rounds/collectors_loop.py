"""The in-round collectors of one table prefix, read in order after its hot statement.

Each collector's reading is recorded in the prefix's report as it arrives (those that
arrive without a statement between them, at once): a cached one
served as it is (`sources.cached_readings`), one whose samples follow from its hot
statement's values alone made straight from them (most of a quiet store's: no `Reading`,
no timing; a thousand stores' scrape spent more on that frame than on their samples), the
others read (from the hot statement's values, or with a statement of their own). A good
reading is handed to the collectors after it that need it; a failing one is marked and
the others go on; a lost connection ends the prefix's reading; a collector that waited
for a locked table skips the rest of its prefix; past the scrape's deadline the rest are
skipped and counted (the deadline is looked at before the first collector and after each
statement: a reading without one takes microseconds).

A cached collector with columns (the anomalies) whose reading comes due is made of its
store's row read with other stores' rows of its server, when it can be: taken from
another store's batch that read it ahead, or read now with the rows of the stores whose
readings come due soon (`sources.cached_readings.CachedRefresh`); else it reads alone, as it does
without a server's lane (`check`).
"""

from __future__ import annotations

from actionscheduler_exporter.metrics.catalog import DATABASE_SECONDS
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.rounds.hot_statement import HotStatement
from actionscheduler_exporter.rounds.report import PrefixReport, Recorded
from actionscheduler_exporter.rounds.site_state import SiteState
from actionscheduler_exporter.sources.database import Collector, DatabaseContext
from actionscheduler_exporter.sources.source import NOT_READ, Reading
from actionscheduler_exporter.timing import Deadline


class CollectorsLoop:
    """One round's reading of its in-round collectors, prefix by prefix."""

    def __init__(self, state: SiteState, deadline: Deadline) -> None:
        self._state = state
        self._deadline = deadline

    def served_from_cache(self, prefix: str, context: DatabaseContext) -> dict[str, Reading]:
        """The cached collectors' readings that this round serves instead of reading
        (those that need no earlier reading of the round to tell: the others decide in
        `_read`)."""
        state = self._state
        served: dict[str, Reading] = {}
        for collector in state.in_round:
            cached_alone = collector.name in state.cached and not collector.needs
            if cached_alone and collector.cacheable(context):
                cached = state.cache.get(prefix, collector.name)
                if cached is not None:
                    served[collector.name] = cached
        return served

    def read(
        self,
        report: PrefixReport,
        context: DatabaseContext,
        earlier: dict[str, Reading],
        statement: HotStatement,
        served: dict[str, Reading],
    ) -> None:
        """Each in-round collector in order, its reading recorded as it arrives (a cached
        one `served` as it is: `sources.cached_readings`); a good reading is handed to the
        collectors after it that need it (`earlier`). The readings are recorded together
        until a collector may send a statement, and at the end."""
        state = self._state
        reader, session, label, prefix = state.reader, context.session, report.label, report.prefix
        from_values, cached = state.from_values, state.cached
        locked = ""  # the collector that found a table locked: the rest are skipped
        # The statements of a reading count to its collector's tier: the session's meter
        # is changed when the tier does, and given back after the loop (the rest of it
        # sends nothing).
        billed = ""
        outer = session.billing(None)
        tried = -1  # the session's statements when the deadline was last looked at
        late = False
        recorded: list[Recorded] = []  # not yet in the report
        try:
            for collector in state.in_round:
                if session.lost:
                    return  # the rest are reported as not read: the connection is gone
                name = collector.name
                skipped = ""
                if not late and session.statements_tried != tried:
                    tried = session.statements_tried
                    late = self._deadline.passed()
                if locked:
                    skipped = f"{name}: skipped, {locked} waited for a locked table"
                elif late:
                    reader.count(label, collector, "deadline")
                    skipped = f"{name}: skipped, the scrape's deadline passed"
                if skipped:
                    recorded.append((name, reader.report(collector, NOT_READ), skipped))
                    continue
                if name in from_values:
                    made = self._from_values(collector, context, report.label, earlier)
                    if made is not None:
                        recorded.append((name, made, ""))
                        continue
                reading = served.get(name)
                if reading is None:
                    if collector.tier != billed:
                        billed = collector.tier
                        session.billing(reader.counters.meter(label, DATABASE_SECONDS, billed))
                    if recorded:  # what is known is recorded before a statement
                        known, recorded = recorded, []
                        report.record(known)
                    reading = self._read(collector, context, report)
                if collector.reports_duration and (share := statement.share(name)):
                    reading = reading.lengthened(share)
                if not reading.ok:
                    if reading.failure == "lock":
                        locked = name
                    # Whether or not its values came with the hot statement: a reading after
                    # a failure is made again, and logs its recovery.
                    state.repeated.drop(prefix, name)
                    failed = reader.report(collector, reading)
                    recorded.append((name, failed, f"{name}: {reading.problem}"))
                    continue
                earlier[name] = reading
                # A cached reading served again as it is reports what it reported then.
                reported = (
                    state.repeated.reported(prefix, name, reading) if name in cached else None
                )
                if reported is None:
                    reported = reader.report(collector, reading)
                    if name in cached:
                        state.repeated.keep(prefix, name, reading, reported)
                recorded.append((name, reported, ""))
        finally:
            session.billing(outer)
            if recorded:
                report.record(recorded)

    def _from_values(
        self,
        collector: Collector,
        context: DatabaseContext,
        label: str,
        earlier: dict[str, Reading],
    ) -> list[Sample] | None:
        """Reads a collector whose samples follow from its hot-statement values alone
        (`Collector.same_samples_for`), reports no duration and is read in every round
        (`SiteState.from_values`), straight from its values: its samples and its success,
        to record, a `Reading` made only for a collector after it that needs it. None
        when its values are not such, or its `read` fails on them (then it is read as any
        other, which counts and logs the failure)."""
        values = context.prefetched.get(collector.name)
        if values is None or not collector.same_samples_for(values):
            return None
        try:
            samples = tuple(collector.read(context))
        except Exception:
            return None
        state, name = self._state, collector.name
        reader = state.reader
        if label in reader.open_sites:
            reader.recovered(label, collector)
        if name in state.needed:
            earlier[name] = Reading(samples, True, 0.0, state.clock())
        return [*samples, reader.success(collector)]

    def _read(
        self, collector: Collector, context: DatabaseContext, report: PrefixReport
    ) -> Reading:
        """A reading of the collector, or its cached one while that may be served, or
        that one renewed once its interval has passed (`Collector.renewed`), or one made
        of a row read with other stores' (`sources.cached_readings.CachedRefresh`)."""
        state = self._state
        if collector.name not in state.cached:
            return state.reader.read(collector, context, report.label)
        freshness = collector.freshness(state.site)
        prefix = report.prefix
        reading = refresh = None
        if collector.cacheable(context):
            cached = state.cache.get(prefix, collector.name)
            if cached is not None:
                return cached
            reading = self._renewed(collector, context, prefix)
        if reading is None:
            wait = min(context.session.timeout, self._deadline.left())
            refresh = state.refresh.read(collector, context, report.label, prefix, wait)
            reading = refresh.reading
        if reading.ok and collector.cacheable(context):
            key = f"{state.site.name}\0{state.site.database}"
            due = state.cache.keep(key, prefix, collector.name, freshness.interval, reading)
            if refresh is not None:
                state.refresh.kept(collector, context, prefix, refresh, due)
        else:
            state.cache.drop(prefix, collector.name)
            state.refresh.forget(collector, context, prefix)
        return reading

    def _renewed(
        self, collector: Collector, context: DatabaseContext, prefix: str
    ) -> Reading | None:
        """The collector's kept reading renewed without a statement, if it can be."""
        kept = self._state.cache.last(prefix, collector.name)
        if kept is None or not kept.ok:
            return None
        started = self._state.clock()
        try:
            samples = collector.renewed(kept.samples, context)
        except Exception:  # a renewal that breaks is not one: the collector is read instead
            return None
        if samples is None:
            return None
        finished = self._state.clock()
        return Reading(samples, True, finished - started, finished)
