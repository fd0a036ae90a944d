"""The heavy tier: totals over the whole actions table, refreshed in the background.

Totals over all complete and failed actions and their per-hook and per-group breakdowns
grow with the table. They come from the chunked walk of `totals.ledger` (short statements,
paused, most chunks only checked), and are a background source (`BackgroundRefresh`): a
scrape that finds them older than `heavy_interval` starts a refresh and serves the values
it has. A refresh uses a connection of its own (closed when it ends, so the hot tier never
waits behind it), on the site's read replica when one is configured, and
`heavy_query_timeout`; a failed collector keeps its last good values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.replica import replica_lag
from actionscheduler_exporter.db.schema import table_names
from actionscheduler_exporter.db.servers import DatabaseServers
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.errors import SourceError
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.background import BackgroundRefresh
from actionscheduler_exporter.sources.database import Collector, DatabaseContext
from actionscheduler_exporter.sources.problem_log import LogLine
from actionscheduler_exporter.sources.reader import SourceReader
from actionscheduler_exporter.sources.source import NOT_READ, Reading
from actionscheduler_exporter.timing import Deadline
from actionscheduler_exporter.totals.ledger import PrefixLedgers

# Readings by (table prefix, collector name).
Readings = dict[tuple[str, str], Reading]


class HeavyTier:
    def __init__(
        self,
        site: SiteConfig,
        collectors: Sequence[Collector],
        reader: SourceReader,
        ledgers: PrefixLedgers,
        servers: DatabaseServers | None = None,
    ) -> None:
        self._site = site
        self._servers = servers
        self.collectors = tuple(collectors)
        self._reader = reader
        self._ledgers = ledgers
        # The replica at the last refresh: whether it was read, and its lag if known.
        self._replica_used = False
        self._replica_lag: float | None = None
        self._replica_problem = ""
        self._prefixes: tuple[str, ...] = ()
        self._labels: dict[str, str] = {}  # each prefix's site label, as rounds gave it
        # The prefixes of each label, made again when `_labels` changes (`served`).
        self._prefixes_by_label: dict[str, list[str]] = {}
        # Each prefix's samples of the readings last served, their read times included.
        self._kept: dict[str, tuple[Readings, list[Sample]]] = {}
        # Each prefix's problems of the readings last served, with the replica's.
        self._kept_problems: dict[str, tuple[Readings, str, list[str]]] = {}
        self._refresh = BackgroundRefresh[Readings](
            f"heavy-{site.name}",
            site.heavy_interval,
            self._read_all,
            reader.clock,
            executor=servers.for_site(site).refreshes if servers else None,
        )

    def samples(self, labels: dict[str, str], round_ends: Deadline) -> dict[str, list[Sample]]:
        """Each prefix's heavy samples (values and health), by table prefix.

        `labels` maps the prefixes whose tables answered in this round to their site labels;
        a refresh that is due starts for them. The exporter's first refresh is waited for
        with half of what the round has left before `round_ends`, and not while more of
        the server's prefixes than it has connections lack a first refresh, nor when it is
        queued behind more others than that (`RefreshQueue`), so that a fresh exporter
        serves every family at once on a store of ordinary size (a big network's first
        walk, or a thousand sites', takes longer than a scrape, whose answer must not wait
        for it)."""
        if not labels:  # nothing answered: no refresh, and no stale values to serve
            return {}
        self._prefixes = tuple(labels)
        if not labels.items() <= self._labels.items():
            self._labels.update(labels)
            by_label: dict[str, list[str]] = {}
            for prefix, label in self._labels.items():
                by_label.setdefault(label, []).append(prefix)
            self._prefixes_by_label = by_label
        for gone in self._kept.keys() - labels.keys():
            del self._kept[gone]
        for gone in self._kept_problems.keys() - labels.keys():
            del self._kept_problems[gone]
        readings = self._refresh.latest(round_ends.left() / 2, len(labels)) or {}
        return {
            prefix: [*self._reported(prefix, readings), *self._replica_samples()]
            for prefix in labels
        }

    def _reported(self, prefix: str, readings: Readings) -> list[Sample]:
        """Every heavy collector's last reading of the prefix, with its health and read
        time. Between refreshes the same readings are served in every round: their samples
        are kept, the same objects until the next refresh."""
        kept = self._kept.get(prefix)
        if kept is None or kept[0] is not readings:
            found = [readings.get((prefix, collector.name)) for collector in self.collectors]
            reported = [
                item
                for collector, reading in zip(self.collectors, found, strict=True)
                for item in self._reader.report(collector, NOT_READ if reading is None else reading)
            ]
            reported += self._reader.read_times(self.collectors, found)
            kept = self._kept[prefix] = (readings, reported)
        return kept[1]

    def close(self) -> None:
        """The site is gone: its refreshes no longer count as due on the server's queue."""
        self._refresh.close()

    def _replica_samples(self) -> list[Sample]:
        if self._site.replica is None:
            return []
        found = [sample(catalog.REPLICA_USED, self._replica_used)]
        if self._replica_lag is not None:
            found.append(sample(catalog.REPLICA_LAG, self._replica_lag))
        return found

    def problems(self, prefix: str) -> list[str]:
        """Why the heavy collectors of a prefix failed at their last refresh, if they did
        (the same list while the readings and the replica's problem are: asked for every
        prefix of every round)."""
        readings = self._refresh.peek() or {}
        kept = self._kept_problems.get(prefix)
        if kept is not None and kept[0] is readings and kept[1] == self._replica_problem:
            return kept[2]
        found = [
            *([self._replica_problem] if self._replica_problem else []),
            *(
                f"{collector.name}: {reading.problem}"
                for collector in self.collectors
                if (reading := readings.get((prefix, collector.name))) and not reading.ok
            ),
        ]
        self._kept_problems[prefix] = (readings, self._replica_problem, found)
        return found

    def served(self, label: str) -> list[Sample]:
        """The last readings for a site label, without starting a refresh (for a scrape
        that gives up waiting on a round)."""
        readings = self._refresh.peek() or {}
        # By the labels' index: a network's thousand labels not reached in time each
        # scanned the thousand prefixes (31 against 9 ms per scrape, after its deadline).
        return [
            item
            for prefix in self._prefixes_by_label.get(label, ())
            for item in self._reported(prefix, readings)
        ]

    def _read_all(self, previous: Readings | None) -> Readings:
        readings = dict(previous or {})
        prefixes = self._prefixes
        self._ledgers.keep(prefixes)
        session = self._session()
        if session is None:  # the replica is unusable and may not be replaced
            for prefix in prefixes:
                for collector in self.collectors:
                    key = (prefix, collector.name)
                    readings[key] = readings.get(key, NOT_READ).failed(0.0, self._replica_problem)
            return readings
        try:
            for prefix in prefixes:
                label = self._labels[prefix]
                tables = table_names(prefix)
                meter = self._reader.counters.meter(label, catalog.DATABASE_SECONDS, "heavy")
                with session.billed_to(meter):
                    totals = self._ledgers.walk(prefix, session, tables)
                    context = DatabaseContext(session, tables, self._site, {}, totals=totals)
                    for collector in self.collectors:
                        key = (prefix, collector.name)
                        readings[key] = self._reader.read(
                            collector, context, label, readings.get(key, NOT_READ)
                        )
        finally:
            session.close()
        return readings

    def _session(self) -> Session | None:
        """The refresh's own session: on the replica when it is up and close enough,
        else on the primary (or none, with `fallback: none`)."""
        site = dataclasses.replace(self._site, query_timeout=self._site.heavy_query_timeout)
        replica = site.replica
        if replica is None:
            return self._new_session(site)
        session = self._new_session(site.on_replica())
        try:
            lag = replica_lag(session)
            self._replica_lag = lag
            problem = (
                f"replica: {lag:.0f}s behind, more than max_lag {replica.max_lag:.0f}s"
                if lag > replica.max_lag
                else ""
            )
        except SourceError as error:
            self._replica_lag = None
            problem = f"replica: {error.message}"
            for label in self._labels.values():
                self._reader.counters.add(label, catalog.ERRORS, error.kind)
        self._replica_problem = problem
        self._replica_used = not problem
        line = LogLine.of("replica not used", site.name, problem=problem) if problem else None
        self._reader.note(f"{site.name}/replica", line)
        if not problem:
            return session
        session.close()
        if replica.fallback == "primary":
            self._replica_problem += "; the totals were read from the primary"
            return self._new_session(site)
        return None

    def _new_session(self, site: SiteConfig) -> Session:
        """A session of the refresh's own: borrowed from the server's pool when there is
        one, else a connection closed when the refresh ends."""
        pool = self._servers.for_site(site).pool if self._servers else None
        return Session(site, check_grants=False, pool=pool, background=True)
