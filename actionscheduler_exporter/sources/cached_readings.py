"""In-round sources' readings kept between rounds, and served in a later one.

A source whose freshness is `Freshness(interval, in_round=True)` runs in the round, like
every hot collector, but is read again only when its interval has passed for that table
prefix (each prefix at its own point of the interval, 0.75 to 1.25 times it, so that a
network's subsites do not all refresh in one scrape), or when the source says its last
reading may not be served (`Source.cacheable`): `CachedReadings`.

A cached reading served again as it is reports the samples it reported the first time
(`RepeatedReadings`): the same objects, which the writer finds unchanged at a glance
(`exposition.kept_texts`).

A cached reading come due whose source has columns (the anomalies, and the tables'
statistics that the round reads with its hot statement otherwise) is made of its store's
row read with other stores' rows of its server, when it can be: taken from another
store's batch that read it ahead, or read now with the rows of the stores whose readings
come due soon (`db.refresh_together`): `CachedRefresh`. Else the source reads alone, as
it does without a server's lane (`check`). A reading made of a row read earlier counts
from when the row was read (its `read_at`): `CachedReadings.keep` serves it no longer
than its interval after that.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import threading
from collections.abc import Mapping, Sequence
from typing import Generic, NamedTuple, TypeVar

from actionscheduler_exporter.db.packed import PackedStatement
from actionscheduler_exporter.db.pool import reader_of
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.refresh_together import Found, RefreshTogether, StoreSource
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.tables import TableStats, parse_table_stats, table_stats_column
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext
from actionscheduler_exporter.sources.reader import SourceReader
from actionscheduler_exporter.sources.source import Reading
from actionscheduler_exporter.timing import Clock

Kept = TypeVar("Kept")


class _ByPrefix(Generic[Kept]):
    """What is kept per table prefix and source, changed under a lock: a network's
    subsites are read by several threads, and a round that ran past its deadline may
    still keep something while the next one starts. Read without it: a dictionary's
    look-up is atomic, and `retain` replaces the dictionary whole (every collector of
    every store's round reads here)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], Kept] = {}
        # The prefixes of the last `retain`; None: the next one looks at every entry.
        self._retained: frozenset[str] | None = None
        # The list they came in: a site of one prefix gives the same list every round.
        self._retained_from: Sequence[str] | None = None

    def _get(self, prefix: str, source: str) -> Kept | None:
        return self._kept.get((prefix, source))

    def _put(self, prefix: str, source: str, kept: Kept) -> None:
        with self._lock:
            self._kept[(prefix, source)] = kept
            if self._retained is not None and prefix not in self._retained:
                # A late round's: the next `retain` looks again.
                self._retained = self._retained_from = None

    def drop(self, prefix: str, source: str) -> None:
        with self._lock:
            self._kept.pop((prefix, source), None)

    def retain(self, prefixes: Sequence[str]) -> None:
        """Forgets the prefixes that are gone (a subsite deleted); asked every round, and
        looks only when the prefixes changed (not at all for the same list, which the
        caller does not change: a site's one prefix)."""
        if prefixes is self._retained_from:
            return
        wanted = frozenset(prefixes)
        with self._lock:
            self._retained_from = prefixes
            if wanted == self._retained:
                return
            self._retained = wanted
            self._kept = {key: kept for key, kept in self._kept.items() if key[0] in wanted}


class CachedReadings(_ByPrefix[tuple[float, Reading]]):
    """Each cached source's last reading, and the clock time it is served until."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self._clock = clock

    def get(self, prefix: str, source: str) -> Reading | None:
        """The kept reading, while its interval has not passed."""
        kept = self._get(prefix, source)
        if kept is None or self._clock() >= kept[0]:
            return None
        return kept[1]

    def last(self, prefix: str, source: str) -> Reading | None:
        """The kept reading, whether or not its interval has passed (to be renewed:
        `Collector.renewed`)."""
        kept = self._get(prefix, source)
        return None if kept is None else kept[1]

    def keep(self, site: str, prefix: str, source: str, interval: float, reading: Reading) -> float:
        """Keeps the reading until its interval has passed since it was read (a reading
        made of a row read for it earlier, in another store's statement, is served for
        less: `db.refresh_together`); returns that clock time."""
        read_at = self._clock() if reading.read_at is None else reading.read_at
        due = read_at + interval * stagger(site, prefix, source)
        self._put(prefix, source, (due, reading))
        return due


class RepeatedReadings(_ByPrefix[tuple[Reading, list[Sample]]]):
    """Each cached collector's last good reading with its reported samples: served again
    as the same object for its interval, it reports the same samples."""

    def reported(self, prefix: str, source: str, reading: Reading) -> list[Sample] | None:
        """The samples reported of `reading` last time, when it is the very reading kept
        (a cached one served again as it is, for its interval)."""
        last = self._get(prefix, source)
        return None if last is None or last[0] is not reading else last[1]

    def keep(self, prefix: str, source: str, reading: Reading, reported: list[Sample]) -> None:
        self._put(prefix, source, (reading, reported))


def stagger(*key: str) -> float:
    """A fixed factor from 0.75 to 1.25 per key: refreshes drift apart over time."""
    digest = hashlib.sha256("\0".join(key).encode()).digest()
    return 0.75 + 0.5 * int.from_bytes(digest[:4], "big") / 2**32


class Refresh(NamedTuple):
    """A cached reading come due, and how it was read."""

    reading: Reading
    seconds: float  # its statement's time: its own, or its share of a batch
    alone: bool  # read in a statement of its own


class KeptRow(NamedTuple):
    """What was made of a source's row, kept: when the row was read, until when it is
    served, and its statement's time (`alone`, or its share of a batch)."""

    read_at: float
    due_at: float
    seconds: float
    alone: bool


# The tables' statistics as a source of the server's batches.
TABLES_SOURCE = "tables"


class Stats(NamedTuple):
    """A prefix's tables' statistics read in a batch: when, and its share of its time."""

    stats: Mapping[str, TableStats]
    read_at: float
    share: float


class CachedRefresh:
    """The cached collectors' readings of one site's round, read with other stores'
    through its server's `RefreshTogether` (None: each reads alone)."""

    def __init__(
        self, together: RefreshTogether | None, reader: SourceReader, clock: Clock
    ) -> None:
        self._together = together
        self._reader = reader
        self._clock = clock

    def read(
        self,
        collector: Collector,
        context: DatabaseContext,
        label: str,
        prefix: str,
        wait: float,
    ) -> Refresh:
        """The collector's reading, made of its row read with other stores' when it can
        be, else read alone. `wait`: seconds at most to wait for a batch that reads its
        row now."""
        columns = None if self._together is None else collector.columns(context)
        if columns is not None:
            try:
                found = self.found(collector.name, columns, context, prefix, wait)
            except QueryError as error:
                # No connection to be had, or it was lost: as the collector's own
                # statement would have failed, without a second try.
                return Refresh(self._reader.failed(collector, label, error), 0.0, alone=True)
            if found is not None:
                refresh = self._made_of(found, collector, columns, context, label)
                if refresh is not None:
                    return refresh
        reading = self._reader.read(collector, context, label)
        return Refresh(reading, reading.duration, alone=True)

    def found(
        self, source: str, columns: Columns, context: DatabaseContext, prefix: str, wait: float
    ) -> Found | None:
        """The store's row of the source's `columns`, read in another store's batch or now
        with the rows of the stores whose reading comes due soon; None when there is none
        to be had so (the caller reads alone). Raises QueryError when the session cannot
        connect, or its connection is lost."""
        together = self._together
        if together is None:
            return None
        statement = _statement(columns)
        store = _store(source, context, prefix)
        now = self._clock()
        return together.take(store, statement, now, wait) or together.refresh(
            context.session, store, statement, now, wait
        )

    def kept(
        self,
        collector: Collector,
        context: DatabaseContext,
        prefix: str,
        refresh: Refresh,
        due_at: float,
    ) -> None:
        """The collector's reading was kept until `due_at`: its store may be read with
        others when it comes due again."""
        columns = None if self._together is None else collector.columns(context)
        read_at = refresh.reading.read_at
        if columns is not None and read_at is not None:
            kept = KeptRow(read_at, due_at, refresh.seconds, refresh.alone)
            self._kept(collector.name, columns, context, prefix, kept)

    def stats(self, context: DatabaseContext, prefix: str, wait: float) -> Stats | None:
        """The prefix's tables' statistics come due, read in another store's batch or now
        with the stores' whose statistics come due soon; None when they are to be read
        in the hot statement. Raises QueryError as the hot statement does (no
        connection)."""
        found = self.found(TABLES_SOURCE, _stats_columns(context.tables), context, prefix, wait)
        if found is None:
            return None
        try:
            stats = parse_table_stats(context.tables, found.row[0])
        except QueryError:
            return None  # cut short or garbled: read in the hot statement
        return Stats(stats, found.read_at, found.share)

    def kept_stats(self, context: DatabaseContext, prefix: str, kept: KeptRow) -> None:
        """The prefix's statistics were kept as `kept` says."""
        self._kept(TABLES_SOURCE, _stats_columns(context.tables), context, prefix, kept)

    def forget_stats(self, context: DatabaseContext, prefix: str) -> None:
        """The prefix's statistics were not kept (a table missing, none read)."""
        if self._together is not None:
            self._together.forget(_store(TABLES_SOURCE, context, prefix))

    def forget(self, collector: Collector, context: DatabaseContext, prefix: str) -> None:
        """The collector's reading failed or is not kept: read alone before it is read
        with others. Nothing for one without columns, never read with others: the due
        split of a store with nothing due, not kept in any of its rounds."""
        if self._together is not None and collector.columns(context) is not None:
            self._together.forget(_store(collector.name, context, prefix))

    def _kept(
        self, source: str, columns: Columns, context: DatabaseContext, prefix: str, kept: KeptRow
    ) -> None:
        if self._together is not None:
            self._together.kept(
                _store(source, context, prefix),
                _statement(columns),
                context.site.database,
                kept.due_at,
                kept.due_at - kept.read_at,
                kept.seconds,
                alone=kept.alone,
            )

    def _made_of(
        self,
        found: Found,
        collector: Collector,
        columns: Columns,
        context: DatabaseContext,
        label: str,
    ) -> Refresh | None:
        """The reading made of a row read in a batch, counted from when it was read;
        None when the row cannot be the collector's answer (then it reads alone)."""
        values, _ = columns.checked(found.row)
        if values is None:
            return None
        context.session.bill(found.share)
        prefetched = {**context.prefetched, collector.name: values}
        reading = self._reader.read(
            collector, dataclasses.replace(context, prefetched=prefetched), label
        )
        if reading.ok:
            reading = Reading(reading.samples, True, reading.duration, found.read_at)
        return Refresh(reading, found.share, alone=False)


@functools.lru_cache(maxsize=4096)
def _stats_columns(tables: TableNames) -> Columns:
    """The statistics' one subquery, as the hot statement reads it."""
    query, args = table_stats_column(tables)
    return Columns((query,), args)


def _statement(columns: Columns) -> PackedStatement:
    """The collector's statement as a batch's branch reads it (compared by value)."""
    return PackedStatement(columns.subqueries, columns.args)


def _store(source: str, context: DatabaseContext, prefix: str) -> StoreSource:
    """The store's reading of the source as its server's batches know it."""
    return (reader_of(context.site), context.session.endpoint, prefix), source
