"""Each collector's logic from the rows its statements return to its samples, without a
server. (What the statements return on real Action Scheduler states is the slow tier's:
tests/support/scenarios.py against MariaDB.)"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from actionscheduler_exporter.collectors.anomalies import AnomaliesCollector
from actionscheduler_exporter.collectors.claims import ClaimsCollector
from actionscheduler_exporter.collectors.due import DueCollector
from actionscheduler_exporter.collectors.due_split import DueSplitCollector
from actionscheduler_exporter.collectors.failures import FailuresCollector
from actionscheduler_exporter.collectors.in_progress import InProgressCollector
from actionscheduler_exporter.collectors.retention import RetentionCollector
from actionscheduler_exporter.collectors.status import StatusCollector
from actionscheduler_exporter.collectors.tables import TablesCollector
from actionscheduler_exporter.config.model import GroupConfig, SiteConfig
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.db.tables import TableStats
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.sources.database import Collector, DatabaseContext
from actionscheduler_exporter.sources.source import Reading
from actionscheduler_exporter.totals.ledger import Totals
from tests.support.fake_session import FakeSession, Script, healthy_store


def read(
    collector: Collector,
    script: Script | None = None,
    totals: Totals | None = None,
    earlier: dict[str, Reading] | None = None,
    **site: Any,
) -> SiteResult:
    """The collector's samples, read as a scrape's result is (`SiteResult.value`)."""
    config = dataclasses.replace(SiteConfig(name="shop"), **site)
    context = DatabaseContext(
        FakeSession(config, script or healthy_store()),
        TableNames("wp_"),
        config,
        {"actions": TableStats(95, 16384), "logs": TableStats(300, 32768)},
        totals=(lambda: totals) if totals is not None else None,
        earlier=earlier or {},
    )
    return SiteResult("shop", (), True, list(collector.read(context)))


def by(result: SiteResult, metric: str, label: str) -> dict[str, float]:
    """A family's values by one label."""
    return {
        dict(item.labels)[label]: item.value
        for item in result.samples
        if item.metric.name == metric
    }


def test_due_counts_claims_apart_and_dates_zero_dated_actions_by_their_log() -> None:
    found = read(DueCollector())
    assert found.value("actionscheduler_due_actions", claim="unclaimed") == 3
    assert found.value("actionscheduler_due_actions", claim="claimed") == 1
    # The zero-dated action's first log row (600 s) is older than any dated one (120 s).
    assert found.value("actionscheduler_oldest_due_action_age_seconds") == 600
    anomalies = read(AnomaliesCollector())
    assert anomalies.value("actionscheduler_undated_pending_actions", date="zero") == 1
    assert anomalies.value("actionscheduler_undated_pending_actions", date="null") == 2
    assert anomalies.value("actionscheduler_orphaned_claims") == 0


def test_the_oldest_due_is_the_dated_one_without_zero_dated_actions() -> None:
    script = healthy_store().answer("IF(MIN(scheduled_date_gmt) < %s", [(120,)])
    found = read(DueCollector(), script)
    assert found.value("actionscheduler_oldest_due_action_age_seconds") == 120
    script = healthy_store().answer("IF(MIN(scheduled_date_gmt) < %s", [(None,)])
    assert read(DueCollector(), script).value("actionscheduler_oldest_due_action_age_seconds") == 0


def test_the_split_folds_groups_keeps_named_ones_and_ages_by_the_log() -> None:
    split = [("a", "h1", 5, 10, 0), ("b", "h2", 3, 50, 0), ("c", "h3", 1, None, 1)]
    script = (
        healthy_store()
        .answer("AS oldest", [*split, (None, "h4", 1, 5, 0)])
        .answer("GROUP BY a.group_id, g.slug, a.hook", [("c", "h3", 70)])
    )
    due = Reading((Sample(catalog.DUE_ACTIONS, 10, (("claim", "unclaimed"),)),), ok=True)
    found = read(
        DueSplitCollector(), script, earlier={"due": due}, top_groups=1,
        groups=(GroupConfig("c"),),
    )  # fmt: skip
    by_group = by(found, "actionscheduler_due_actions_by_group", "group")
    assert by_group == {"a": 5, "c": 1, "other": 4}  # "b" and "" folded, "c" named
    ages = by(found, "actionscheduler_oldest_due_action_age_seconds_by_group", "group")
    assert ages == {"a": 10, "c": 70, "other": 50}  # "c" is zero-dated: its log's age
    assert found.value("actionscheduler_due_actions_unsplit") == 0


def test_claims_and_running_actions() -> None:
    claims = read(ClaimsCollector())
    assert claims.value("actionscheduler_active_claims") == 2
    assert claims.value("actionscheduler_claim_rows") == 3
    assert claims.value("actionscheduler_oldest_claim_age_seconds") == 50
    running = read(InProgressCollector())
    assert running.value("actionscheduler_in_progress_actions") == 2
    assert running.value("actionscheduler_oldest_in_progress_action_age_seconds") == 45


def test_a_future_date_is_no_negative_age() -> None:
    script = healthy_store().answer("last_attempt_gmt END), UTC_TIMESTAMP())", [(-300,)])
    found = read(InProgressCollector(), script)
    assert found.value("actionscheduler_oldest_in_progress_action_age_seconds") == 0


def test_status_totals_fold_groups_and_count_unknown_statuses() -> None:
    totals = Totals(
        by_status_group=Counter(
            {("pending", 1): 4, ("complete", 2): 10, ("complete", 3): 1, ("paused", None): 2}
        )
    )
    script = healthy_store().answer(
        "SELECT group_id, slug", [(1, "emails"), (2, "reports"), (3, "imports")]
    )
    found = read(StatusCollector(), script, totals, top_groups=2)
    assert found.value("actionscheduler_actions", status="pending") == 4
    assert found.value("actionscheduler_actions", status="unknown") == 2
    assert found.value("actionscheduler_actions", status="failed") == 0
    by_group = "actionscheduler_actions_by_group"
    assert found.value(by_group, status="complete", group="reports") == 10
    assert found.value(by_group, status="complete", group="other") == 1
    assert found.value("actionscheduler_exporter_folded_label_values", label="group") == 2


def test_failures_by_hook_are_folded_and_retention_reads_the_oldest_finished() -> None:
    totals = Totals(failed_by_hook=Counter({"a": 5, "b": 2, "c": 1}), oldest_finished_age=86400)
    failed = read(FailuresCollector(), totals=totals, top_hooks=1)
    assert failed.value("actionscheduler_failed_actions", hook="a") == 5
    assert failed.value("actionscheduler_failed_actions", hook="other") == 3
    kept = read(RetentionCollector(), totals=totals)
    assert kept.value("actionscheduler_oldest_finished_action_age_seconds") == 86400


def test_table_sizes_come_from_the_statistics() -> None:
    found = read(TablesCollector())
    assert found.value("actionscheduler_table_rows", table="logs") == 300
    assert found.value("actionscheduler_table_size_bytes", table="actions") == 16384


def test_table_samples_are_kept_while_the_round_serves_the_same_statistics() -> None:
    """The statistics are read about every five minutes: the samples made of them are kept until
    then, made again of new statistics, and forgotten with a subsite that is gone."""
    config = SiteConfig(name="shop")
    stats = {"actions": TableStats(95, 16384)}
    collector = TablesCollector()

    def samples(of: dict[str, TableStats], prefix: str = "wp_") -> tuple[Sample, ...]:
        context = DatabaseContext(FakeSession(config, Script()), TableNames(prefix), config, of)
        return tuple(collector.read(context))

    first = samples(stats)
    assert samples(stats) is first
    renewed = samples({"actions": TableStats(96, 16384)})
    assert renewed is not first and renewed[0].value == 96
    other = samples(stats, "wp_2_")
    collector.retain(["wp_"])
    assert samples(stats, "wp_2_") is not other
