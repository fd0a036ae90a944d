"""A session that answers from a script, for the fast tier: what a collector or a round
does with the rows it gets, without a server. The slow tier proves the same paths
against real MariaDB; this one shows the logic between statement and sample, the
deadline paths and the accounting, in milliseconds."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.schema import DATABASE_MARK, TableNames, in_database
from actionscheduler_exporter.db.session import Row, Session
from actionscheduler_exporter.sources.database import DatabaseContext

# Rows, or a function of the arguments that returns them, or an error to raise.
Answer = list[Row] | Callable[[Sequence[object] | None], list[Row]] | QueryError


@dataclass
class Script:
    """Answers by the first fragment the statement contains; `blocked` fragments wait for
    their event (a lock the test releases). A statement of scalar subqueries (`SELECT (q1),
    (q2)`: the round's combined statement, a collector's columns) is answered subquery by
    subquery, each from the first value of its own answer, as the server would."""

    answers: list[tuple[str, Answer]] = field(default_factory=list)
    blocked: dict[str, threading.Event] = field(default_factory=dict)
    # Subqueries answered 0 when no fragment matches: every in-round collector's declared
    # `columns`, so that a new collector's round runs before its own test scripts values.
    declared: set[str] = field(default_factory=set)
    # Fragments whose statement needs a connection the session cannot borrow (a round
    # answered in another's batch borrows only then): the session is lost with it.
    refused: dict[str, QueryError] = field(default_factory=dict)

    def answer(self, fragment: str, answer: Answer) -> Script:
        self.answers.insert(0, (fragment, answer))
        return self


class FakeSession(Session):
    def __init__(
        self,
        site: SiteConfig,
        script: Script,
        *,
        seconds_per_statement: float = 0.01,
        can_write: bool = False,
        connect_error: QueryError | None = None,
    ) -> None:
        super().__init__(site, check_grants=False)
        self.script = script
        self.sent: list[str] = []
        self.seconds_per_statement = seconds_per_statement
        self._can_write = can_write
        self.connect_error = connect_error
        self._is_open = False

    @property
    def connected(self) -> bool:
        return self._is_open

    def open(self) -> None:
        if self.connect_error is not None:
            self.lost = True
            raise self.connect_error
        self._is_open = True
        self.lost = False
        self.has_connected = True
        self.can_write = self._can_write

    def release(self) -> None:
        pass

    def close(self) -> None:
        self._is_open = False
        self.lost = True

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        self.statements_tried += 1
        self.open()
        sql, args = self._in_own_database(sql, args)
        for fragment, refusal in self.script.refused.items():
            if fragment in sql:
                self._is_open, self.lost, self.connect_error = False, True, refusal
                raise refusal
        self.sent.append(sql)
        if self._meter is not None:
            self._meter(self.seconds_per_statement)
        for fragment, event in self.script.blocked.items():
            if fragment in sql:
                event.wait(30)
        subqueries = scalar_subqueries(sql)
        if subqueries is None:
            return self._answer(sql, args)
        row: list[Any] = []
        remaining = list(args or ())
        for subquery in subqueries:
            count = subquery.count("%s")
            values, remaining = remaining[:count], remaining[count:]
            row.append(self._scalar(subquery, values))
        return [tuple(row)]

    def _scalar(self, subquery: str, args: list[object]) -> Any:
        """A scalar subquery's value; one of several values (`values_together`) is
        answered value by value, each as a subquery of its own, joined as the server
        joins them."""
        parts = together_parts(subquery)
        if parts is None:
            answered = self._answer(subquery, args)
            return answered[0][0] if answered else None
        texts = []
        for part in parts:
            count = part.count("%s")
            values, args = args[:count], args[count:]
            value = self._scalar(part, values)
            texts.append("" if value is None else str(value))
        return " ".join(texts)

    def _in_own_database(
        self, sql: str, args: Sequence[object] | None
    ) -> tuple[str, Sequence[object] | None]:
        """The statement as the script names it: its tables without their database, as a
        site without one has them sent. A table not named in the site's database is
        refused: on a pooled connection it would be read in whichever database the
        connection was opened in."""
        unqualified = _TABLE_NAME.search(sql.replace(f"{DATABASE_MARK}.", "`x`."))
        if unqualified:
            raise AssertionError(f"a table not named in the site's database: {unqualified[0]}")
        _, args = in_database("", args, self._site.database)
        return as_scripted(sql), args

    def _answer(self, sql: str, args: Sequence[object] | None) -> list[Row]:
        for fragment, answer in self.script.answers:
            if fragment in sql:
                if isinstance(answer, QueryError):
                    if answer.connection_lost:
                        self._is_open = False
                        self.lost = True
                    raise answer
                return answer(args) if callable(answer) else list(answer)
        if " ".join(sql.split()) in self.script.declared:
            return [(0,)]
        raise AssertionError(f"no scripted answer for: {' '.join(sql.split())[:120]}")

    def query_typed(
        self, sql: str, args: Sequence[object] | None = None
    ) -> tuple[list[Row], tuple[int, ...]]:
        """No types: the round's statement stays in columns (packed answers are the slow
        tier's: tests/test_packed_answers.py)."""
        return self.query(sql, args), ()

    def query_named(self, sql: str) -> list[dict[str, Any]]:
        raise AssertionError("not scripted")


def as_scripted(sql: str) -> str:
    """A statement's text as scripts name it: its tables without their database."""
    return sql.replace(f"{DATABASE_MARK}.", "")


# A table's name where it is not after a database's (`db`.) or part of a longer word.
_TABLE_NAME = re.compile(r"(?<![.\w])\w*actionscheduler_(?:actions|claims|groups|logs)\b")


def scalar_subqueries(sql: str) -> list[str] | None:
    """The subqueries of `SELECT (q1) AS c0, (q2) AS c1, ...` (the names optional); None
    for any other statement."""
    if not sql.startswith("SELECT ("):
        return None
    sql = re.sub(r"\) AS c\d+", ")", sql)
    found: list[str] = []
    depth, start = 0, 0
    for position, character in enumerate(sql[len("SELECT ") :], start=len("SELECT ")):
        if character == "(":
            depth += 1
            if depth == 1:
                start = position + 1
        elif character == ")":
            depth -= 1
            if depth == 0:
                found.append(sql[start:position])
        elif depth == 0 and character not in ", ":
            return None  # something outside the subqueries: not of that form
    return found


def together_parts(subquery: str) -> list[str] | None:
    """The subqueries of one value each that a subquery of several values
    (`SELECT CONCAT(COALESCE(e1, ''), ' ', COALESCE(e2, '')) FROM ...`) stands for:
    `SELECT e1 FROM ...`, ...; None for any other subquery."""
    head = "SELECT CONCAT("
    if not subquery.startswith(head):
        return None
    items: list[str] = []
    depth, start = 0, len(head)
    for position in range(len(head), len(subquery)):
        character = subquery[position]
        if character == "(":
            depth += 1
        elif character == ")" and depth:
            depth -= 1
        elif character in ",)" and depth == 0:
            items.append(subquery[start:position].strip())
            start = position + 1
            if character == ")":
                source = subquery[position + 1 :].strip()
                break
    else:
        return None
    wrapped = [item for item in items if item != "' '"]
    expressions = [
        item.removeprefix("COALESCE(").removesuffix(", '')")
        for item in wrapped
        if item.startswith("COALESCE(") and item.endswith(", '')")
    ]
    if len(expressions) != len(wrapped):
        return None
    return [f"SELECT {expression} {source}" for expression in expressions]


TABLE_STATS: list[Row] = [
    (f"wp_actionscheduler_{table}", 10, 16384) for table in ("actions", "claims", "groups", "logs")
]


def declared_columns(site: SiteConfig | None = None) -> set[str]:
    """The subqueries every in-round source of the site declares in its `columns`, as the
    round's hot statement sends them (white space folded)."""
    site = site or SiteConfig(name="shop", database="wp")
    session = FakeSession(site, Script())
    context = DatabaseContext(session, TableNames(site.table_prefix), site, {})
    found: set[str] = set()
    for collector in site_sources(site).in_round:
        columns = collector.columns(context)
        if columns is not None:
            for query in columns.subqueries:
                found.update(
                    " ".join(as_scripted(part).split()) for part in together_parts(query) or [query]
                )
    return found


def healthy_store() -> Script:
    """A small store: 3 unclaimed due actions (one zero-dated), 1 claimed, 2 NULL-dated,
    2 running, three claim rows of which two hold open actions, no new log rows (the
    claimed due actions, the active claims and the claim rows differ, so that a value
    read in the wrong place shows); the split of the due backlog answered. Scalar
    subqueries are answered one by one (more specific fragments first); any other declared
    column of an in-round collector is 0."""
    packed = ",".join(f"{name} {rows} {size}" for name, rows, size in TABLE_STATS)
    return Script(
        [
            ("CONCAT_WS(','", [(packed,)]),
            ("information_schema.TABLES", TABLE_STATS),
            # Due: every due action, the claimed ones, the oldest (-1: a zero-dated one).
            ("COUNT(*) FROM wp_actionscheduler_actions WHERE status = 'pending' AND"
             " scheduled_date_gmt <= UTC", [(4,)]),
            ("COUNT(CASE WHEN status = 'pending'", [(1,)]),
            ("IF(MIN(scheduled_date_gmt) < %s", [(-1,)]),
            # ... then the oldest dated one and the zero-dated one's first log row.
            ("AND scheduled_date_gmt BETWEEN %s AND UTC_TIMESTAMP()", [(120,)]),
            # Anomalies: the zero-dated and NULL-dated pending actions.
            ("WHERE status = 'pending' AND scheduled_date_gmt < %s", [(1,)]),
            ("scheduled_date_gmt IS NULL", [(2,)]),
            # The split and the zero-dated ages (whole statements).
            ("GROUP BY a.group_id, g.slug, a.hook", [("reports", "wc_export", 600)]),
            ("MIN(l.log_date_gmt)", [(600,)]),  # the zero-dated action's first log row
            ("AS oldest", [("reports", "wc_export", 2, 120, 1), (None, "webhook", 2, 30, 0)]),
            # Running actions: how many, and the oldest start.
            ("last_attempt_gmt END), UTC_TIMESTAMP()) FROM wp_actionscheduler_actions WHERE"
             " status = 'in-progress'", [(45,)]),
            ("WHERE status = 'in-progress'", [(2,)]),
            # Claims: runner's count, rows, oldest; orphaned and stale (anomalies).
            ("COUNT(DISTINCT claim_id)", [(2,)]),
            ("THEN date_created_gmt END)", [(50,)]),
            ("NOT EXISTS", [(0,)]),
            ("INTERVAL %s SECOND", [(0,)]),
            ("SELECT COUNT(*) FROM wp_actionscheduler_claims", [(3,)]),
            # The log: the newest id (and, first, the server's increment).
            ("COALESCE(MAX(log_id), 0)", [(0,)]),
            ("@@auto_increment_increment", [(1,)]),
        ],
        declared=declared_columns(),
    )  # fmt: skip
