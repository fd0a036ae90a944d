"""How far a read replica is behind: read before the heavy tier trusts its totals."""

from __future__ import annotations

from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.session import Session
from actionscheduler_exporter.errors import SourceError

# MariaDB 10.5+ and MySQL 8.0.22+ say REPLICA; older servers know only SLAVE.
_STATUS_STATEMENTS = ("SHOW REPLICA STATUS", "SHOW SLAVE STATUS")
_LAG_COLUMNS = ("Seconds_Behind_Master", "Seconds_Behind_Source")


def replica_lag(session: Session) -> float:
    """Seconds behind its primary; SourceError saying why when it cannot be told."""
    rows: list[dict[str, object]] | None = None
    for statement in _STATUS_STATEMENTS:
        try:
            rows = session.query_named(statement)
            break
        except QueryError as error:
            if "1227" in error.message or "denied" in error.message.lower():
                raise SourceError(
                    "query",
                    "cannot read the replica's lag: grant the exporter's user REPLICA "
                    "MONITOR (MariaDB 10.5+, SLAVE MONITOR before 10.5.9) or REPLICATION "
                    "CLIENT (MySQL)",
                ) from error
            if error.connection_lost:
                raise
    if not rows:
        raise SourceError("query", "the replica is not replicating (its replica status is empty)")
    status = rows[0]
    for column in _LAG_COLUMNS:
        if column in status:
            lag = status[column]
            if lag is None:
                raise SourceError("query", "replication is stopped on the replica")
            return float(str(lag))
    raise SourceError("query", "the replica's status has no lag column")
