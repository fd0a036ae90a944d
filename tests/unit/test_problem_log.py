"""A thousand sites' changes of one kind in one log line; each change once."""

from __future__ import annotations

import logging

import pytest

from actionscheduler_exporter.sources.problem_log import ProblemLog


def down(log: ProblemLog, site: str, kind: str = "connect") -> None:
    log.set(site, f"site down site={site} kind={kind} problem='refused'", site=site,
            recovered=f"site recovered site={site}")  # fmt: skip


def test_a_thousand_sites_down_at_once_are_one_line(caplog: pytest.LogCaptureFixture) -> None:
    log = ProblemLog(buffered=True)
    caplog.set_level(logging.INFO)
    for index in range(1000):
        down(log, f"db{index}")
    down(log, "lonely", kind="timeout")
    assert not caplog.records  # kept until the scrape ends
    log.flush()
    assert [record.getMessage() for record in caplog.records] == [
        "site down sites=1000 [db0, db1, db2, db3, db4 and 995 more] kind=connect "
        "problem='refused'",
        "site down site=lonely kind=timeout problem='refused'",
    ]
    caplog.clear()
    for index in range(1000):
        down(log, f"db{index}")  # unchanged: nothing to say
        log.set(f"db{index}", "", site=f"db{index}", recovered=f"site recovered site=db{index}")
    log.flush()
    assert [record.getMessage() for record in caplog.records] == [
        "site recovered sites=1000 [db0, db1, db2, db3, db4 and 995 more]"
    ]


def test_unbuffered_changes_are_written_at_once(caplog: pytest.LogCaptureFixture) -> None:
    log = ProblemLog()
    down(log, "shop")
    assert [record.getMessage() for record in caplog.records] == [
        "site down site=shop kind=connect problem='refused'"
    ]
