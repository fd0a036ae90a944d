"""`database: auto`: one site entry for every database of a server that holds Action
Scheduler's tables, as `table_prefix: auto` covers the subsites of one database.

Agencies keep a database per store on a few servers; listing hundreds of them by hand
goes stale the day a store is added. The discovery lists the databases the exporter's
user can see whose name matches `database_pattern` (an SQL LIKE pattern, `%` by default)
and that have a `*actionscheduler_actions` table, at most every `discovery_interval`, in
the background; each becomes a site named `<entry name>:<database>`, read like any other
(in its server's lane, on its shard). Databases that disappear are dropped.
"""

from __future__ import annotations

import dataclasses
import logging

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import ACTIONS_SUFFIX, placeholders
from actionscheduler_exporter.db.servers import DatabaseServers
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.sources.background import BackgroundRefresh
from actionscheduler_exporter.timing import Clock, Deadline

log = logging.getLogger(__name__)

_SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")


@dataclasses.dataclass(frozen=True)
class Discovered:
    databases: tuple[str, ...] = ()
    problem: str = ""  # why the last listing failed (the databases are the last good ones)
    listed: bool = False  # a listing has succeeded at least once


class DatabaseDiscovery:
    def __init__(self, entry: SiteConfig, servers: DatabaseServers | None, clock: Clock) -> None:
        self.entry = entry
        listing = dataclasses.replace(entry, database="")
        self._session = Session(
            listing, check_grants=False, pool=servers.for_site(entry).pool if servers else None
        )
        self._refresh = BackgroundRefresh[Discovered](
            f"discovery-{entry.name}", entry.discovery_interval, self._list, clock
        )

    def sites(self, until: Deadline) -> tuple[list[SiteConfig], Discovered]:
        """A site per database found so far (waiting for the first listing until `until`),
        and how the last listing went."""
        found = self._refresh.latest(until.left()) or Discovered()
        return [self.site_for(database) for database in found.databases], found

    @property
    def may_wait(self) -> bool:
        """Whether `sites` may wait: until the first listing has answered."""
        return self._refresh.peek() is None

    def site_for(self, database: str) -> SiteConfig:
        return dataclasses.replace(
            self.entry, name=f"{self.entry.name}:{database}", database=database
        )

    def close(self) -> None:
        self._session.close()

    def _list(self, previous: Discovered | None) -> Discovered:
        try:
            rows = self._session.query(
                "SELECT DISTINCT TABLE_SCHEMA FROM information_schema.TABLES"
                " WHERE TABLE_NAME LIKE %s AND TABLE_SCHEMA LIKE %s"
                f" AND TABLE_SCHEMA NOT IN ({placeholders(_SYSTEM_SCHEMAS)})"
                " ORDER BY TABLE_SCHEMA",
                (
                    "%" + ACTIONS_SUFFIX.replace("_", "\\_"),
                    self.entry.database_pattern,
                    *_SYSTEM_SCHEMAS,
                ),
            )
        except QueryError as error:
            last = previous or Discovered()
            if error.message != last.problem:
                emit(log, logging.WARNING, "database discovery failed", site=self.entry.name,
                     error=error.message)  # fmt: skip
            return dataclasses.replace(last, problem=error.message)
        finally:
            self._session.release()
        databases = tuple(str(name) for (name,) in rows)
        if previous is not None and previous.databases != databases:
            emit(log, logging.INFO, "databases discovered", site=self.entry.name,
                 added=sorted(set(databases) - set(previous.databases)),
                 removed=sorted(set(previous.databases) - set(databases)))  # fmt: skip
        return Discovered(databases, "", True)
