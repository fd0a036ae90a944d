"""The round without a server: one assembly path, the deadline and partial results, the
time budget, database time where statements run, and collectors that depend on others.
A scripted session answers; a clock the test moves keeps time."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actionscheduler_exporter.collectors import due_split, site_sources
from actionscheduler_exporter.collectors.claims import ClaimsCollector
from actionscheduler_exporter.collectors.due import DueCollector
from actionscheduler_exporter.collectors.due_split import DueSplitCollector
from actionscheduler_exporter.config.model import GroupConfig, SiteConfig
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.database_round import TABLE_STATS_INTERVAL
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.rounds.site import MonitoredSite
from actionscheduler_exporter.sources.database import DatabaseContext, check_order
from actionscheduler_exporter.timing import Deadline
from tests.support.clock import FakeClock
from tests.support.fake_session import TABLE_STATS, FakeSession, Script, healthy_store
from tests.support.rounds import read_round


def config(**overrides: Any) -> SiteConfig:
    defaults: dict[str, Any] = {"name": "shop", "database": "wp", "heavy_interval": 300.0}
    return dataclasses.replace(SiteConfig(name="shop"), **(defaults | overrides))


# The sources every round reads, from the one list of them.
IN_ROUND = tuple(source.name for source in site_sources(config()).in_round)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rounds(clock: FakeClock) -> Iterator[list[MonitoredSite]]:
    made: list[MonitoredSite] = []
    yield made
    for site_round in made:
        site_round.close()


def make_round(
    made: list[MonitoredSite], clock: FakeClock, session_for: object = None, **overrides: Any
) -> tuple[MonitoredSite, FakeSession]:
    site = config(**overrides)
    session = FakeSession(site, healthy_store()) if session_for is None else session_for
    assert isinstance(session, FakeSession)
    # Heavy collectors are background (heavy_interval > 0): only the in-round ones here.
    sources = site_sources(site, clock).without_heavy()
    site_round = MonitoredSite(site, clock, sources=sources, session=session)
    made.append(site_round)
    return site_round, session


def success(result: SiteResult) -> dict[str, float]:
    return {
        dict(item.labels)["collector"]: item.value
        for item in result.samples
        if item.metric is catalog.COLLECTOR_SUCCESS
    }


def test_a_complete_round_reports_every_collector_and_its_database_time(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    site_round, session = make_round(rounds, clock)
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    assert result.up
    assert success(result) == dict.fromkeys(IN_ROUND, 1.0)
    assert result.value("actionscheduler_due_actions", claim="unclaimed") == 3
    assert result.value("actionscheduler_oldest_due_action_age_seconds") == 600
    assert result.value("actionscheduler_up") == 1
    # Every statement's time is counted for the site, where it ran (0.01 s each here).
    hot = result.value("actionscheduler_exporter_database_seconds", tier="hot")
    assert hot == pytest.approx(0.01 * len(session.sent))


def test_a_duration_is_written_only_for_collectors_with_statements_of_their_own(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    """Those served by the hot statement alone would each repeat a share of its time (4
    series per site that carry nothing: docs/performance.md, 'What it costs Prometheus')."""
    site_round, _ = make_round(rounds, clock)
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    timed = {
        dict(item.labels)["collector"]
        for item in result.samples
        if item.metric is catalog.COLLECTOR_DURATION
    }
    assert timed == set(IN_ROUND) - {"due", "in_progress", "claims", "anomalies", "tables"}
    assert {"due_split", "log_events"} <= timed


def test_two_scrapes_sharing_a_round_assemble_the_same_result(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    site_round, _ = make_round(rounds, clock)
    reports = site_round.run(Deadline(clock() + 10, clock))
    first, second = (site_round.finish(reports, Deadline(clock(), clock)) for _ in range(2))
    assert [(s.name, s.labels, s.value) for s in first[0].samples] == [
        (s.name, s.labels, s.value) for s in second[0].samples
    ]


def test_an_ended_rounds_reports_are_read_without_copies_and_left_as_they_were(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    site_round, _ = make_round(rounds, clock)
    reports = site_round.run(Deadline(clock() + 10, clock))
    (report,) = reports.snapshot().values()
    assert reports.snapshot()[report.label] is report  # ended: no copy made per scrape
    samples, problems = list(report.samples), list(report.problems)
    (result,) = site_round.finish(reports, Deadline(clock(), clock))
    # The assembly adds its samples to its own list, not to the round's report.
    assert len(result.samples) > len(samples)
    assert (report.samples, report.problems) == (samples, problems)


def test_a_scrape_that_stops_waiting_gets_what_the_round_read_so_far(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    script = healthy_store()
    split = script.blocked["AS oldest"] = threading.Event()
    site_round, _ = make_round(rounds, clock, FakeSession(config(), script))
    running = threading.Thread(target=site_round.run, args=(Deadline(clock() + 10, clock),))
    running.start()
    try:
        partial, scrapes = wait_for_reading(site_round, clock, "due")
        assert partial.up  # the database answered
        assert success(partial) == {**dict.fromkeys(IN_ROUND, 0.0), "due": 1.0}
        assert partial.value("actionscheduler_due_actions", claim="unclaimed") == 3
        # Each scrape that stopped waiting counted one (on a loaded machine the first may
        # come before the round has read anything).
        assert partial.value("actionscheduler_exporter_errors", kind="deadline") == scrapes
        assert "longer than the scrape's deadline" in " ".join(partial.problems)
    finally:
        split.set()
        running.join(10)
    (complete,) = site_round.finish(site_round._reports, Deadline(clock(), clock))
    assert success(complete) == dict.fromkeys(IN_ROUND, 1.0)


def wait_for_reading(
    site_round: MonitoredSite, clock: FakeClock, name: str
) -> tuple[SiteResult, int]:
    """The partial result once the round has read the named collector (the round thread
    is blocked on the next one by the script), and how many scrapes stopped waiting for
    it (each a `finish` of the round in flight)."""
    for scrapes in range(1, 2001):
        (result,) = site_round.finish(None, Deadline(clock(), clock))
        if success(result).get(name) == 1.0:
            return result, scrapes
        threading.Event().wait(0.005)
    raise AssertionError(f"the round never read {name}")


def test_a_site_the_round_has_not_reached_keeps_its_last_answer(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    site_round, _ = make_round(rounds, clock)
    (never,) = site_round.finish(None, Deadline(clock(), clock))  # no round has run yet
    assert never.value("actionscheduler_up") is None  # unknown: neither up nor down
    assert success(never) == dict.fromkeys(IN_ROUND, 0.0)
    read_round(site_round, clock)
    (queued,) = site_round.finish(
        None, Deadline(clock(), clock)
    )  # the next round waits for a thread
    assert queued.value("actionscheduler_up") == 1
    assert success(queued) == dict.fromkeys(IN_ROUND, 0.0)
    assert queued.value("actionscheduler_due_actions", claim="unclaimed") is None
    assert queued.value("actionscheduler_exporter_errors", kind="deadline") == 2


def test_a_database_that_does_not_answer_is_down_and_counted_once(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    refused = QueryError("connect", "(2003) Can't connect", connection_lost=True)
    site = config()
    session = FakeSession(site, healthy_store(), connect_error=refused)
    site_round, _ = make_round(rounds, clock, session)
    reports = site_round.run(Deadline(clock() + 10, clock))
    for _ in range(3):  # three scrapes share the round
        (result,) = site_round.finish(reports, Deadline(clock(), clock))
    assert not result.up
    assert result.value("actionscheduler_up") == 0
    assert result.problems[0] == "(2003) Can't connect"
    assert result.value("actionscheduler_exporter_errors", kind="connect") == 1
    assert success(result) == dict.fromkeys(IN_ROUND, 0.0)


def test_a_connection_lost_mid_round_marks_the_rest_not_read(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    script = healthy_store().answer(
        "AS oldest", QueryError("connect", "(2013) Lost connection", connection_lost=True)
    )
    site_round, _ = make_round(rounds, clock, FakeSession(config(), script))
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    assert not result.up
    assert success(result)["due"] == 1 and success(result)["claims"] == 0
    assert result.value("actionscheduler_exporter_errors", kind="connect") == 1


def test_a_statement_that_cannot_borrow_a_connection_fails_the_store_with_that_problem(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    """A store answered in another round's batch borrows a connection only for a
    statement of its own; when none can be had, the store is down with the borrow's
    problem (not a lost connection), counted once."""
    busy = QueryError(
        "connect",
        "all 4 connections to db:3306 stayed busy for 2s (connections_per_server)",
        connection_lost=True,
    )
    script = healthy_store()
    script.refused["AS oldest"] = busy
    site_round, _ = make_round(rounds, clock, FakeSession(config(), script))
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    assert not result.up
    assert result.problems[0] == busy.message
    assert result.value("actionscheduler_exporter_errors", kind="connect") == 1


def test_collectors_past_the_deadline_are_skipped_and_counted(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    site_round, session = make_round(rounds, clock)
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() - 1, clock)), Deadline(clock(), clock)
    )
    assert result.up  # the tables answered
    assert success(result) == dict.fromkeys(IN_ROUND, 0.0)
    assert result.value("actionscheduler_exporter_errors", kind="deadline") == len(IN_ROUND)
    assert session.sent == [s for s in session.sent if "information_schema" in s]


def test_collectors_after_a_statement_that_outlasted_the_deadline_are_skipped(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    """The loop looks at the deadline after each statement: the split's, which takes past
    it, is read; every collector after it is skipped and counted, those before it are
    read."""

    def slow_split(_args: object) -> list[tuple[Any, ...]]:
        clock.advance(20)
        return [("reports", "wc_export", 600)]

    script = healthy_store().answer("GROUP BY a.group_id, g.slug, a.hook", slow_split)
    site_round, _ = make_round(rounds, clock, FakeSession(config(), script))
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    after = IN_ROUND[IN_ROUND.index("due_split") + 1 :]
    assert after  # the test needs collectors after the split
    assert success(result) == {"due": 1.0, "due_split": 1.0} | dict.fromkeys(after, 0.0)
    assert result.value("actionscheduler_exporter_errors", kind="deadline") == len(after)


def test_the_split_takes_the_due_total_from_the_due_reading_it_needs() -> None:
    with pytest.raises(ValueError, match="due_split needs \\['due'\\]"):
        check_order([DueSplitCollector(), DueCollector()])
    check_order([DueCollector(), DueSplitCollector()])


def test_the_split_sends_nothing_when_nothing_is_due_and_no_count_of_its_own(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    site_round, session = make_round(rounds, clock, FakeSession(config(), nothing_due()))
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    assert success(result)["due_split"] == 1
    assert not [sql for sql in session.sent if "AS oldest" in sql]
    capped, session = make_round(rounds, clock, due_split_rows=4)
    (result,) = read_round(capped, clock)
    # 4 due of the store, split 4 (the cap): the unsplit rest is the due total's, no count.
    assert result.value("actionscheduler_due_actions_unsplit") == 0
    own_count = "SELECT COUNT(*) FROM wp_actionscheduler_actions WHERE status = 'pending'"
    assert not [sql for sql in session.sent if sql.startswith(own_count)]


def test_a_kept_split_is_served_until_its_interval_and_nothing_due_is_current(
    rounds: list[MonitoredSite], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No time passes for the ages either: the scripted oldest due age stays as it is.
    monkeypatch.setattr(due_split, "_elapsed", lambda: 0.0)
    script = healthy_store()
    site_round, session = make_round(
        rounds, clock, FakeSession(config(), script), due_split_interval=60.0
    )

    def split_statements() -> int:
        session.sent.clear()
        read_round(site_round, clock)
        return len([sql for sql in session.sent if "AS oldest" in sql])

    assert split_statements() == 1
    clock.advance(40)  # inside the shortest stagger (45 s)
    assert split_statements() == 0
    clock.advance(40)  # past the longest (75 s), the backlog as it was: renewed
    assert split_statements() == 0
    script.answer("COALESCE(MAX(log_id), 0)", [(7,)])  # a log row since: read again
    clock.advance(80)
    assert split_statements() == 1
    nothing_due(script)
    assert split_statements() == 0  # nothing due: current, without a statement
    del script.answers[:4]
    assert split_statements() == 1  # a backlog again: split at once


def test_a_renewed_split_ages_what_is_due_and_a_named_group_with_nothing_due_stays_at_0(
    rounds: list[MonitoredSite], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renewed 30 s later (the oldest due age 600 s, then 630 s: the same action), the
    groups' and hooks' ages grow by 30 s; a named group that has nothing due is exported
    at 0, and stays at 0."""
    elapsed = iter([0.0, 30.0])
    monkeypatch.setattr(due_split, "_elapsed", lambda: next(elapsed))
    script = healthy_store()
    site_round, session = make_round(
        rounds,
        clock,
        FakeSession(config(), script),
        due_split_interval=60.0,
        groups=(GroupConfig("newsletters"),),
    )

    def ages() -> dict[str, float]:
        session.sent.clear()
        (result,) = read_round(site_round, clock)
        return {
            dict(s.labels)["group"]: s.value
            for s in result.samples
            if s.metric is catalog.OLDEST_DUE_AGE_BY_GROUP
        }

    assert ages() == {"reports": 600, "": 30, "newsletters": 0}
    script.answer("MIN(l.log_date_gmt)", [(630,)])  # the zero-dated oldest, 30 s older
    clock.advance(80)
    assert ages() == {"reports": 630, "": 60, "newsletters": 0}
    assert not [sql for sql in session.sent if "AS oldest" in sql]  # renewed


def nothing_due(script: Script | None = None) -> Script:
    """The store's due counts made 0, zero-dated ones too: four answers in front."""
    script = script or healthy_store()
    for fragment, answer in (
        ("WHERE status = 'pending' AND scheduled_date_gmt <= U", 0),
        ("COUNT(CASE WHEN status = 'pending'", 0),
        ("IF(MIN(scheduled_date_gmt) < %s", None),
        ("WHERE status = 'pending' AND scheduled_date_gmt < %s", 0),
    ):
        script.answer(fragment, [(answer,)])
    return script


def test_collectors_made_of_their_values_are_read_from_them_at_every_round(
    rounds: list[MonitoredSite], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The due and claims collectors read the claimed due actions and the active claims in
    one pass (`collectors.claimed`), each with the other's value beside its own: each is
    read from its values at every round, and shows what changed at once."""
    made: dict[str, int] = {"due": 0, "claims": 0}
    for collector in (DueCollector, ClaimsCollector):
        monkeypatch.setattr(collector, "read", _counted(collector.read, made, collector.name))
    script = nothing_due()
    site_round, session = make_round(rounds, clock, FakeSession(config(), script))

    def read() -> SiteResult:
        (result,) = site_round.finish(
            site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
        )
        return result

    read()
    read()
    assert made == {"due": 2, "claims": 2}
    # Four due actions, all claimed: the claimed due actions are due's.
    script.answer("WHERE status = 'pending' AND scheduled_date_gmt <= U", [(4,)])
    script.answer("IF(MIN(scheduled_date_gmt) < %s", [(30,)])
    script.answer("COUNT(CASE WHEN status = 'pending'", [(4,)])
    script.answer("AS oldest", [("reports", "wc_export", 4, 30, 0)])  # the split, of them
    assert read().value(catalog.DUE_ACTIONS.name, claim="claimed") == 4
    script.answer("COUNT(DISTINCT claim_id)", [(5,)])  # the active claims: claims'
    session.sent.clear()
    result = read()
    assert result.value(catalog.ACTIVE_CLAIMS.name) == 5
    assert result.value(catalog.DUE_ACTIONS.name, claim="claimed") == 4
    assert made == {"due": 4, "claims": 4}
    assert success(result)["due"] == success(result)["claims"] == 1
    # Read from the hot statement's values: no statement of their own.
    assert not [sql for sql in session.sent if "COUNT(DISTINCT claim_id)" in sql][1:]


def test_a_collector_whose_read_fails_on_its_values_fails_alone_and_recovers(
    rounds: list[MonitoredSite], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector read from its values whose `read` breaks on them is read as any other:
    its failure counted and shown, the others read; it recovers at the next good values."""
    read = ClaimsCollector.read

    def breaking(collector: ClaimsCollector, context: DatabaseContext) -> Any:
        if context.values_of(collector)[1] == 7:
            raise ValueError("seven")
        return read(collector, context)

    monkeypatch.setattr(ClaimsCollector, "read", breaking)
    script = healthy_store()
    site_round, _ = make_round(rounds, clock, FakeSession(config(), script))
    (first,) = read_round(site_round, clock)
    assert success(first)["claims"] == 1
    script.answer("COUNT(DISTINCT claim_id)", [(7,)])
    (broken,) = read_round(site_round, clock)
    assert success(broken)["claims"] == 0
    assert success(broken)["due"] == success(broken)["in_progress"] == 1
    assert broken.value(catalog.ERRORS.name, kind="malformed") == 1
    assert any("claims: the answer did not fit" in problem for problem in broken.problems)
    script.answer("COUNT(DISTINCT claim_id)", [(3,)])
    (again,) = read_round(site_round, clock)
    assert success(again)["claims"] == 1
    assert again.value(catalog.ACTIVE_CLAIMS.name) == 3


def _counted(read: Any, made: dict[str, int], name: str) -> Any:
    """The collector's own `read`, counting its readings."""

    def counting(collector: Any, context: DatabaseContext) -> Any:
        made[name] += 1
        return read(collector, context)

    return counting


def test_a_locked_table_skips_the_rest_of_the_site_and_says_why(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    script = healthy_store().answer(
        "IF(MIN(scheduled_date_gmt) < %s",
        QueryError("lock", "(1205) Lock wait timeout exceeded", connection_lost=False),
    )
    site_round, session = make_round(rounds, clock, FakeSession(config(), script))
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    assert result.up  # the server answered: the site is not down, its tables are locked
    assert success(result) == dict.fromkeys(IN_ROUND, 0.0)
    assert result.value("actionscheduler_exporter_errors", kind="lock") == 1
    assert "claims: skipped, due waited for a locked table" in result.problems
    # The round's statement, then the statistics and the due collector alone, locked.
    assert len(session.sent) == 3


def test_a_quiet_site_costs_one_statement_per_round(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    """Nothing due, no new log rows: the tables' statistics and every hot collector's
    values come from one statement (a thousand sites' scrape is a thousand of them)."""
    site_round, session = make_round(rounds, clock, FakeSession(config(), nothing_due()))
    for _ in range(2):
        session.sent.clear()
        (result,) = site_round.finish(
            site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
        )
        assert success(result) == dict.fromkeys(IN_ROUND, 1.0)
        assert len(session.sent) == 1
    assert result.value("actionscheduler_table_rows", table="logs") == 10
    assert result.value("actionscheduler_active_claims") == 2


def stats_sent(session: FakeSession) -> int:
    return sum("information_schema.TABLES" in sql for sql in session.sent)


def test_table_statistics_are_read_about_every_five_minutes_not_every_round(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    """The floor of a thousand sites' scrape reads no statistics: a round reuses the last
    ones within TABLE_STATS_INTERVAL (each prefix staggered 0.75 to 1.25 times it)."""
    site_round, session = make_round(rounds, clock, FakeSession(config(), nothing_due()))
    sent = []
    for step in (0, 1, 150, 1, 300):  # seconds the clock moves before each round
        clock.advance(step)
        session.sent.clear()
        (result,) = site_round.finish(
            site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
        )
        assert success(result) == dict.fromkeys(IN_ROUND, 1.0)
        assert result.value("actionscheduler_table_rows", table="logs") == 10
        assert result.value("actionscheduler_table_exists", table="claims") == 1
        assert len(session.sent) == 1
        sent.append(stats_sent(session))
    assert sent == [1, 0, 0, 0, 1]
    # Kept at 152 s after the read (at least 0.75 x 300 s), read again at 452 s (at most
    # 1.25 x 300 s).
    assert 1.25 * TABLE_STATS_INTERVAL < 452 and 0.75 * TABLE_STATS_INTERVAL > 152


def test_a_table_dropped_while_its_statistics_are_kept_is_missing_at_once(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    script = nothing_due()
    site_round, session = make_round(rounds, clock, FakeSession(config(), script))
    site_round.finish(site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock))
    dropped = QueryError(
        "query", "(1146) Table 'wp.wp_actionscheduler_claims' doesn't exist", connection_lost=False
    )
    script.answer("FROM wp_actionscheduler_claims", dropped)
    left = [row for row in TABLE_STATS if row[0] != "wp_actionscheduler_claims"]
    script.answer("information_schema.TABLES", left)
    script.answer("CONCAT_WS(','", [(",".join(f"{n} {r} {b}" for n, r, b in left),)])
    clock.advance(1)
    session.sent.clear()
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    assert not result.up
    assert result.value("actionscheduler_table_exists", table="claims") == 0
    assert "missing table(s) wp_actionscheduler_claims" in result.problems[0]
    assert stats_sent(session) >= 1


def test_a_locked_table_with_kept_statistics_is_waited_for_once_per_statement(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    """A failed statement sent with kept statistics is not sent again whole: behind a
    lock that would wait twice, holding a connection the server's other sites need."""
    script = nothing_due()
    site_round, session = make_round(rounds, clock, FakeSession(config(), script))
    site_round.finish(site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock))
    locked = QueryError("lock", "(1205) Lock wait timeout exceeded", connection_lost=False)
    script.answer("FROM wp_actionscheduler_actions", locked)
    clock.advance(1)
    session.sent.clear()
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    assert result.up
    assert (result.value("actionscheduler_exporter_errors", kind="lock") or 0) >= 1
    # The round's statement, the statistics apart, then the first collector apart (locked:
    # the rest of the prefix is skipped).
    waited = [sql for sql in session.sent if "FROM wp_actionscheduler_actions" in sql]
    assert len(waited) == 2, session.sent
    assert stats_sent(session) == 1


def test_a_failing_part_of_the_round_statement_fails_its_collector_alone(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    script = healthy_store().answer(
        "NOT EXISTS",
        QueryError("timeout", "(1969) Query execution was interrupted", connection_lost=False),
    )
    site_round, _ = make_round(rounds, clock, FakeSession(config(), script))
    (result,) = site_round.finish(
        site_round.run(Deadline(clock() + 10, clock)), Deadline(clock(), clock)
    )
    assert result.up
    assert success(result) == {**dict.fromkeys(IN_ROUND, 1.0), "anomalies": 0.0}
    assert result.value("actionscheduler_exporter_errors", kind="timeout") == 1
    assert result.value("actionscheduler_in_progress_actions") == 2


def test_anomalies_are_read_about_every_minute_and_left_out_of_the_statement_between(
    rounds: list[MonitoredSite], clock: FakeClock
) -> None:
    """What the floor does not read is read less often: between its refreshes the cached
    collector's columns are not in the round's statement, and its reading is served."""
    script = nothing_due()
    site_round, session = make_round(rounds, clock, FakeSession(config(), script))
    asked = []
    for step in (0, 40, 40):  # inside the shortest stagger (45 s), then past the longest
        clock.advance(step)
        session.sent.clear()
        (result,) = read_round(site_round, clock)
        assert success(result) == dict.fromkeys(IN_ROUND, 1.0)
        assert result.value("actionscheduler_undated_pending_actions", date="null") == 2
        assert len(session.sent) == 1
        asked.append("NOT EXISTS" in session.sent[0])
    assert asked == [True, False, True]
    every_round, session = make_round(
        rounds, clock, FakeSession(config(), nothing_due()), anomalies_interval=0.0
    )
    for _ in range(2):
        session.sent.clear()
        read_round(every_round, clock)
        assert "NOT EXISTS" in session.sent[0]


def test_the_rounds_context_is_rebuilt_with_every_field() -> None:
    """A round makes its collectors' context again after the hot statement, naming each
    field (`DatabaseRound._read_prefix`; dataclasses.replace reads the class's fields on
    every call): a new field must be passed there too."""
    assert [f.name for f in dataclasses.fields(DatabaseContext)] == [
        "session", "tables", "site", "table_stats", "totals", "earlier", "prefetched",
        "stats_error",
    ]  # fmt: skip


def test_a_sites_known_labels_follow_its_prefixes_even_when_a_round_replaces_them_meanwhile(
    rounds: list[MonitoredSite], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The known labels are made once per list of prefixes (asked for every site at every
    scrape); a round that replaces the list while a scrape makes them (a subsite deleted)
    must not leave the old list's labels kept for the new one (found by a review)."""
    site_round, _ = make_round(rounds, clock, table_prefix="auto")
    state = site_round._state
    state.known_prefixes = ["wp_", "wp_2_", "wp_3_"]
    assert state.known_labels() == ("shop:wp_", "shop:wp_2_", "shop:wp_3_")
    assert state.known_labels() is state.known_labels()  # kept while the list is
    replaced = ["wp_", "wp_2_"]
    made_label = type(state).site_label

    def replaced_meanwhile(self: Any, prefix: str) -> str:
        self.known_prefixes = replaced  # the round's `_prefixes`, on its own thread
        return made_label(self, prefix)

    state.known_prefixes = ["wp_", "wp_2_", "wp_3_", "wp_4_"]
    with monkeypatch.context() as patched:
        patched.setattr(type(state), "site_label", replaced_meanwhile)
        racing = state.known_labels()
    assert racing == ("shop:wp_", "shop:wp_2_", "shop:wp_3_", "shop:wp_4_")
    assert state.known_labels() == ("shop:wp_", "shop:wp_2_")  # not the racing call's
    state.others_prefixes, state.known_prefixes = 2, []
    assert state.known_labels() == ()  # the others' shards serve the whole network
