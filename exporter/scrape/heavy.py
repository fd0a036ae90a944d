"""The heavy tier: collectors whose queries grow with the table, refreshed in the background.

Totals over all complete and failed actions and their per-hook and per-group breakdowns
scan large sets: seconds per query at ten million actions. Running them on every scrape
would make the exporter the heaviest client of the shop's database, so a scrape that
finds them older than `heavy_interval` starts a refresh in a thread of its own and serves
the values it has. A refresh uses a connection of its own (closed when it ends, so the
hot tier never waits behind a long scan) and `heavy_query_timeout`. Two refreshes never
run at once, and a failed one is retried at the next interval, not at the next scrape.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from exporter import catalog
from exporter.collectors.base import Collector, Sample, SiteContext, sample
from exporter.config.model import SiteConfig
from exporter.db.errors import QueryError
from exporter.db.session import Session
from exporter.db.tables import TableNames
from exporter.scrape.errors import ErrorCounts
from exporter.scrape.result import collector_samples

log = logging.getLogger(__name__)


@dataclass
class _Reading:
    """One collector's latest attempt for one table prefix, and its last good values."""

    ok: bool = False
    duration: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    read_at: float | None = None  # time.monotonic() of the last success


class HeavyTier:
    def __init__(
        self,
        site: SiteConfig,
        collectors: Sequence[Collector],
        errors: ErrorCounts,
        site_label: Callable[[str], str],
    ) -> None:
        self._site = site
        self._collectors = tuple(collectors)
        self._errors = errors
        self._site_label = site_label
        self._lock = threading.Lock()
        self._readings: dict[tuple[str, str], _Reading] = {}
        self._refresh: threading.Thread | None = None
        self._last_start: float | None = None

    def refresh_if_stale(self, prefixes: Sequence[str], first_wait: float) -> None:
        """Starts a refresh when the last one started `heavy_interval` ago or more.

        The exporter's very first refresh is waited for, up to `first_wait` seconds, so that
        a fresh exporter serves every family at once on a store of ordinary size.
        """
        now = time.monotonic()
        with self._lock:
            if self._refresh is not None and self._refresh.is_alive():
                return
            if self._last_start is not None and now - self._last_start < self._site.heavy_interval:
                return
            first = self._last_start is None
            self._last_start = now
            refresh = self._refresh = threading.Thread(
                target=self._run,
                args=(tuple(prefixes),),
                name=f"heavy-{self._site.name}",
                daemon=True,
            )
            refresh.start()
        if first:
            refresh.join(max(0.0, first_wait))

    def samples(self, prefix: str) -> list[Sample]:
        """The last good values of each collector, with its success, duration and age."""
        now = time.monotonic()
        result: list[Sample] = []
        with self._lock:
            for collector in self._collectors:
                reading = self._readings.get((prefix, collector.name))
                if reading is None:  # the first refresh has not reached it yet
                    continue
                result += reading.samples
                result += collector_samples(collector, reading.ok, reading.duration)
                if reading.read_at is not None:
                    result.append(
                        sample(
                            catalog.COLLECTOR_AGE, now - reading.read_at, collector=collector.name
                        )
                    )
        return result

    def _run(self, prefixes: tuple[str, ...]) -> None:
        session = Session(
            dataclasses.replace(self._site, query_timeout=self._site.heavy_query_timeout),
            check_grants=False,
        )
        try:
            for prefix in prefixes:
                context = SiteContext(session, TableNames(prefix), self._site, {})
                for collector in self._collectors:
                    self._read(context, prefix, collector)
        finally:
            session.close()

    def _read(self, context: SiteContext, prefix: str, collector: Collector) -> None:
        started = time.monotonic()
        try:
            samples = list(collector.collect(context))
        except QueryError as error:
            label = self._site_label(prefix)
            self._errors.add(label, error.kind)
            log.warning(
                "heavy collector failed site=%s collector=%s kind=%s error=%r",
                label,
                collector.name,
                error.kind,
                error.message,
            )
            with self._lock:
                reading = self._readings.setdefault((prefix, collector.name), _Reading())
                reading.ok, reading.duration = False, time.monotonic() - started
            return
        finished = time.monotonic()
        with self._lock:
            self._readings[(prefix, collector.name)] = _Reading(
                ok=True, duration=finished - started, samples=samples, read_at=finished
            )
