"""A session that answers from a script, for the fast tier: what a collector or a round
does with the rows it gets, without a server. The slow tier proves the same paths
against real MariaDB; this one shows the logic between statement and sample, the
deadline paths and the accounting, in milliseconds."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.config.model import SiteConfig
from exporter.db.query_error import QueryError
from exporter.db.session import Row, Session

# Rows, or a function of the arguments that returns them, or an error to raise.
Answer = list[Row] | Callable[[Sequence[object] | None], list[Row]] | QueryError


@dataclass
class Script:
    """Answers by the first fragment the statement contains; `blocked` fragments wait for
    their event (a lock the test releases)."""

    answers: list[tuple[str, Answer]] = field(default_factory=list)
    blocked: dict[str, threading.Event] = field(default_factory=dict)

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
            raise self.connect_error
        self._is_open = True
        self.can_write = self._can_write

    def release(self) -> None:
        pass

    def close(self) -> None:
        self._is_open = False

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        self.open()
        self.sent.append(sql)
        if self._meter is not None:
            self._meter(self.seconds_per_statement)
        for fragment, event in self.script.blocked.items():
            if fragment in sql:
                event.wait(30)
        for fragment, answer in self.script.answers:
            if fragment in sql:
                if isinstance(answer, QueryError):
                    if answer.connection_lost:
                        self._is_open = False
                    raise answer
                return answer(args) if callable(answer) else list(answer)
        raise AssertionError(f"no scripted answer for: {' '.join(sql.split())[:120]}")

    def query_named(self, sql: str) -> list[dict[str, Any]]:
        raise AssertionError("not scripted")


TABLE_STATS: list[Row] = [
    (f"wp_actionscheduler_{table}", 10, 16384) for table in ("actions", "claims", "groups", "logs")
]


def healthy_store() -> Script:
    """A small store: 3 unclaimed due actions (one zero-dated), 1 claimed, 2 running, one
    claim, no new log rows; the group slug lookup and the split answered."""
    return Script(
        [
            ("information_schema.TABLES", TABLE_STATS),
            # Due: unclaimed, zero-dated, age; claimed, zero-dated, age; NULL-dated.
            ("SELECT (SELECT COUNT(*) FROM wp_actionscheduler_actions WHERE claim_id = 0",
             [(3, 1, 120, 1, 0, 30, 2)]),
            ("GROUP BY a.group_id, g.slug, a.hook", [("reports", "wc_export", 600)]),
            ("MIN(l.log_date_gmt)", [(600,)]),  # the zero-dated action's first log row
            ("AS oldest", [("reports", "wc_export", 2, 120, 1), (None, "webhook", 2, 30, 0)]),
            ("WHERE status = 'in-progress'", [(2, 45)]),
            ("COUNT(DISTINCT claim_id)", [(1, 1, 50, 0, 0)]),
            ("COALESCE(MAX(log_id), 0)", [(0, None)]),
        ]
    )  # fmt: skip
