"""A thousand sites' changes of one kind in one log line; each change once; every field a
logfmt key of its own."""

from __future__ import annotations

import logging

import pytest

from actionscheduler_exporter.logs import LogfmtFormatter
from actionscheduler_exporter.sources.problem_log import LogLine, ProblemLog
from tests.support.logfmt import parse


def down(log: ProblemLog, site: str, kind: str = "connect") -> None:
    log.set(site, LogLine.of("site down", site, kind=kind, problem="refused"),
            recovered=LogLine.of("site recovered", site))  # fmt: skip


def lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, str]]:
    formatter = LogfmtFormatter()
    found = []
    for record in caplog.records:
        fields = parse(formatter.format(record))
        for key in ("ts", "level", "logger"):
            fields.pop(key)
        found.append(fields)
    return found


def test_a_thousand_sites_down_at_once_are_one_line(caplog: pytest.LogCaptureFixture) -> None:
    log = ProblemLog(buffered=True)
    caplog.set_level(logging.INFO)
    for index in range(1000):
        down(log, f"db{index}")
    down(log, "lonely", kind="timeout")
    assert not caplog.records  # kept until the scrape ends
    log.flush()
    assert lines(caplog) == [
        {"msg": "site down", "sites": "1000", "site": "db0,db1,db2,db3,db4", "more": "995",
         "kind": "connect", "problem": "refused"},
        {"msg": "site down", "site": "lonely", "kind": "timeout", "problem": "refused"},
    ]  # fmt: skip
    caplog.clear()
    for index in range(1000):
        down(log, f"db{index}")  # unchanged: nothing to say
        log.set(f"db{index}", None, recovered=LogLine.of("site recovered", f"db{index}"))
    log.flush()
    assert lines(caplog) == [
        {"msg": "site recovered", "sites": "1000", "site": "db0,db1,db2,db3,db4", "more": "995"}
    ]


def test_unbuffered_changes_are_written_at_once(caplog: pytest.LogCaptureFixture) -> None:
    log = ProblemLog()
    down(log, "shop")
    assert lines(caplog) == [
        {"msg": "site down", "site": "shop", "kind": "connect", "problem": "refused"}
    ]


def test_the_log_counts_the_keys_with_a_problem_now_by_site(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What a reading looks at before clearing its key: while its site has no problem,
    nothing needs clearing."""
    log = ProblemLog()
    caplog.set_level(logging.INFO)
    down(log, "db1")
    down(log, "db1", kind="timeout")  # another problem of the same key
    down(log, "db2")
    log.set("db2/due", LogLine.of("source failed", "db2", source="due"))
    assert log.open_sites == {"db1": 1, "db2": 2}
    log.clear("db1", lambda: LogLine.of("site recovered", "db1"))
    log.clear("db1", lambda: LogLine.of("site recovered", "db1"))
    log.set("db3", None)  # never had one
    assert log.open_sites == {"db2": 2}
    log.set("db2", None)
    log.set("db2/due", LogLine.of("source failed", "db2", source="due", kind="lock"))
    assert log.open_sites == {"db2": 1}
    log.clear("db2/due", lambda: LogLine.of("source recovered", "db2", source="due"))
    assert log.open_sites == {}
    messages = [line["msg"] for line in lines(caplog)]
    assert messages.count("site recovered") == 1 and messages.count("source recovered") == 1
