"""A cached collector's reading come due, made of a row read with other stores' rows.

When a collector cached between rounds that has columns (the anomalies) must be read
again, its store's row is taken from another store's batch that read it ahead, or read
now with the rows of the stores of its server whose readings come due soon
(`db.refresh_together`); else the collector reads alone, as it does without a server's
lane (`check`). A reading made of a row read earlier counts from when the row was read
(its `read_at`): `CachedReadings.keep` serves it no longer than its interval after that.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from actionscheduler_exporter.db.packed import PackedStatement
from actionscheduler_exporter.db.pool import reader_of
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.refresh_together import Found, RefreshTogether, StoreSource
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext
from actionscheduler_exporter.sources.reader import SourceReader
from actionscheduler_exporter.sources.source import Reading
from actionscheduler_exporter.timing import Clock


class Refresh(NamedTuple):
    reading: Reading
    seconds: float  # its statement's time: its own, or its share of a batch
    alone: bool  # read in a statement of its own


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
        together = self._together
        columns = None if together is None else collector.columns(context)
        if together is not None and columns is not None:
            statement = _statement(columns)
            store = _store(collector, context, prefix)
            now = self._clock()
            try:
                found = together.take(store, statement, now, wait) or together.refresh(
                    context.session, store, statement, now, wait
                )
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

    def kept(
        self,
        collector: Collector,
        context: DatabaseContext,
        prefix: str,
        refresh: Refresh,
        due_at: float,
    ) -> None:
        """The reading was kept until `due_at`: its store may be read with others when it
        comes due again."""
        together = self._together
        columns = None if together is None else collector.columns(context)
        read_at = refresh.reading.read_at
        if together is None or columns is None or read_at is None:
            return
        together.kept(
            _store(collector, context, prefix),
            _statement(columns),
            context.site.database,
            due_at,
            due_at - read_at,
            refresh.seconds,
            alone=refresh.alone,
        )

    def forget(self, collector: Collector, context: DatabaseContext, prefix: str) -> None:
        """The reading failed or is not kept: read alone before it is read with others."""
        if self._together is not None:
            self._together.forget(_store(collector, context, prefix))

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
        values = _values(columns, found.row)
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


def _statement(columns: Columns) -> PackedStatement:
    """The collector's statement as a batch's branch reads it (compared by value)."""
    return PackedStatement(columns.subqueries, columns.args)


def _store(collector: Collector, context: DatabaseContext, prefix: str) -> StoreSource:
    """The store's reading of the collector as its server's batches know it."""
    return (reader_of(context.site), context.session.endpoint, prefix), collector.name


def _values(columns: Columns, row: Row) -> Row | None:
    """The collector's values of a row read for it, as `DatabaseContext.values_of` reads
    them; None when they cannot be its answer."""
    values = columns.values(row)
    if values is None or columns.problem(values):
        return None
    return values
