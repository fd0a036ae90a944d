"""Whatever one site's rows or one statement's answer look like (NULLs where the schema has
none, as a killed statement can return; values of the wrong type; rows of the wrong
shape), the error stays inside that site's collectors: the round ends, the other sites
are served unchanged, and the exposition parses. A scripted session answers every
statement, and every column of it, with the hostile value."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site import MonitoredSite
from testbed.accept_headers import PROMETHEUS_ACCEPT
from tests.support.clock import FakeClock
from tests.support.fake_session import FakeSession, Script, healthy_store, scalar_subqueries
from tests.support.reference_exposition import parsed
from tests.support.rounds import read_round

HOSTILE: dict[str, Any] = {
    "null": None,
    "text": "not a number",
    "bytes": b"\xff\xfe\x00",
    "negative": -7,
    "huge": 10**400,
    "nan": float("nan"),
    "list": [1, 2],
    "mapping": {"a": 1},
}


class HostileSession(FakeSession):
    """Every statement answers rows of `value` (of `width` columns, `rows` of them);
    a statement of scalar subqueries answers `value` in every column."""

    def __init__(self, site: SiteConfig, value: Any, width: int, rows: int) -> None:
        super().__init__(site, Script())
        self.value, self.width, self.rows = value, width, rows

    def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
        self.open()
        self.sent.append(sql)
        subqueries = scalar_subqueries(sql)
        if subqueries is not None:
            return [tuple(self.value for _ in subqueries)]
        return [tuple(self.value for _ in range(self.width)) for _ in range(self.rows)]


def site_config(name: str, **overrides: Any) -> SiteConfig:
    defaults: dict[str, Any] = {"name": name, "database": "wp", "heavy_interval": 0.0}
    return dataclasses.replace(SiteConfig(name=name), **(defaults | overrides))


def one_round(site: SiteConfig, session: FakeSession, clock: FakeClock) -> list[SiteResult]:
    monitored = MonitoredSite(site, clock, sources=site_sources(site, clock), session=session)
    try:
        return read_round(monitored, clock)
    finally:
        monitored.close()


def hot_round(session_of: type[FakeSession], script: Script, name: str = "shop") -> SiteResult:
    """One round of the in-round sources of a site whose session answers from `script`."""
    clock = FakeClock()
    site = site_config(name, heavy_interval=300.0)
    sources = site_sources(site, clock).without_heavy()
    monitored = MonitoredSite(site, clock, sources=sources, session=session_of(site, script))
    try:
        (result,) = read_round(monitored, clock)
    finally:
        monitored.close()
    return result


def healthy() -> list[SiteResult]:
    return [hot_round(FakeSession, healthy_store(), "healthy")]


def without_durations(families: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The healthy site's families, less those whose values are times of this run."""
    timed = {"actionscheduler_exporter_collector_duration_seconds",
             "actionscheduler_exporter_scrape_duration_seconds",
             "actionscheduler_exporter_database_seconds"}  # fmt: skip
    return [family for family in families if family[0] not in timed]


@pytest.mark.parametrize("prefix", ["wp_", "auto"])
@pytest.mark.parametrize(("width", "rows"), [(1, 1), (5, 3), (0, 1), (12, 2)])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_answer_fails_only_that_sites_collectors(
    kind: str, width: int, rows: int, prefix: str
) -> None:
    clock = FakeClock()
    alone = healthy()
    site = site_config("hostile", table_prefix=prefix)
    hostile = one_round(site, HostileSession(site, HOSTILE[kind], width, rows), clock)
    beside = healthy()

    body, content_type = render([*hostile, *beside], PROMETHEUS_ACCEPT)
    families = parsed(body, content_type)  # the whole exposition parses
    assert families
    assert [r.label for r in beside] == ["healthy"]
    (reference,) = alone
    (served,) = beside
    assert served.up
    kept = {(s.metric.name, s.labels, s.value) for s in reference.samples}
    found = {(s.metric.name, s.labels, s.value) for s in served.samples}
    timed = {"actionscheduler_exporter_collector_duration_seconds",
             "actionscheduler_exporter_scrape_duration_seconds"}  # fmt: skip
    assert {x for x in kept if x[0] not in timed} == {x for x in found if x[0] not in timed}
    for result in hostile:
        success = [s.value for s in result.samples if s.metric is catalog.COLLECTOR_SUCCESS]
        assert all(value in (0.0, 1.0) for value in success)
        for item in result.samples:
            assert type(item.value) in (int, float), item


def test_a_killed_hot_statement_is_read_again_apart_not_reported_as_missing_tables() -> None:
    """MariaDB can answer a killed statement with a row of NULLs and no error: the hot
    statement's answer is not used (a count cannot be NULL), the statistics and each
    collector are read alone, and the site is up with its values."""

    class KilledOnce(FakeSession):
        def query(self, sql: str, args: Sequence[object] | None = None) -> list[Row]:
            subqueries = scalar_subqueries(sql)
            if subqueries is not None and "CONCAT_WS(','" in sql:
                self.sent.append(sql)
                return [tuple(None for _ in subqueries)]
            return super().query(sql, args)

    result = hot_round(KilledOnce, healthy_store())
    assert result.up, result.problems
    assert not [p for p in result.problems if "missing table" in p]
    assert result.value("actionscheduler_due_actions", claim="unclaimed") == 3
    assert result.value("actionscheduler_table_exists", table="logs") == 1
    success = {
        dict(s.labels)["collector"]: s.value
        for s in result.samples
        if s.metric is catalog.COLLECTOR_SUCCESS
    }
    assert set(success.values()) == {1.0}


def test_a_null_count_in_a_collectors_own_statement_fails_it_as_malformed() -> None:
    script = healthy_store().answer("COUNT(DISTINCT claim_id)", [(None,)])
    result = hot_round(FakeSession, script)
    assert result.up
    assert result.value("actionscheduler_exporter_collector_success", collector="claims") == 0
    assert result.value("actionscheduler_exporter_collector_success", collector="due") == 1
    assert result.value("actionscheduler_exporter_errors", kind="malformed") == 1
    assert any("cannot be NULL" in problem for problem in result.problems)


def test_table_statistics_cut_short_are_read_again_apart() -> None:
    """Packed statistics that come garbled (cut short on the way): the statistics are
    read alone, as rows."""
    result = hot_round(FakeSession, healthy_store().answer("CONCAT_WS(','", [("wp_a",)]))
    assert result.up, result.problems
    assert result.value("actionscheduler_table_rows", table="logs") == 10
