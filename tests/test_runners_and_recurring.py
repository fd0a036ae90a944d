"""Who runs the queue, and recurring jobs Action Scheduler stopped (issue 27), on real
MariaDB histories written as Action Scheduler writes them, in English and in German."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable

import pytest

from actionscheduler_exporter.config.model import WorkersConfig
from actionscheduler_exporter.metrics import catalog
from testbed import schedules
from testbed.messages import ENGLISH, GERMAN, Messages
from testbed.store import ActionSchedulerStore
from tests.support.follower import Follow, Follower
from tests.support.recurring import (
    BATCH,
    FEED,
    NIGHTLY,
    PURGED,
    REPORT,
    STOCK,
    stopped_hooks,
    table_rows,
    translated,
    write_history,
)


def by_label(
    exporter: Follower, metric: catalog.MetricDef, *names: str
) -> dict[tuple[str, ...], float]:
    assert exporter.last is not None
    return {
        tuple(dict(item.labels)[name] for name in names): item.value
        for item in exporter.last.samples
        if item.metric is metric
    }


def table_truth(store: ActionSchedulerStore) -> set[str]:
    return stopped_hooks(*table_rows(store))


@pytest.mark.parametrize("messages", [ENGLISH, GERMAN], ids=["english", "german"])
def test_runner_counts_and_stopped_recurring_jobs_equal_the_truth(
    store: ActionSchedulerStore, follow: Follow, messages: Messages
) -> None:
    store.messages = messages
    exporter = follow(heavy_interval=0)
    exporter.scrape()
    expected = write_history(store)
    if messages is GERMAN:
        expected = translated(expected)
    exporter.scrape()

    runs = by_label(exporter, catalog.STARTED_BY_RUNNER, "runner")
    assert runs == {(runner,): expected.runs[runner] for runner in catalog.RUNNER_LABELS}
    assert exporter.total(catalog.STARTED) == sum(expected.runs.values())
    # the completed and failed counters, as one metric with the outcome as a label
    assert exporter.total(catalog.FINISHED, outcome="completed") == exporter.total(
        catalog.COMPLETED
    )
    assert exporter.total(catalog.FINISHED, outcome="failed") == exporter.total(catalog.FAILED)
    assert exporter.total(catalog.FINISHED) > 0

    stopped = by_label(exporter, catalog.RECURRING_STOPPED, "hook", "reason")
    assert {key: value for key, value in stopped.items() if value} == expected.stopped
    # every recurring hook has its series from its first event, at 0
    assert {hook for hook, _ in stopped} == {NIGHTLY, REPORT, STOCK, BATCH, FEED, PURGED}

    gauge = by_label(exporter, catalog.RECURRING_HOOKS_STOPPED, "hook")
    assert {hook for (hook,), value in gauge.items() if value} == table_truth(store)
    # PURGED: unscheduled after three failures, its canceled row purged: not a stop. In
    # German, REPORT's stop (its threshold lowered to 3) is told by its stop row alone,
    # which the gauge reads in English only (the stop counter counts it, reason unknown).
    if messages is GERMAN:
        assert gauge == {(NIGHTLY,): 1, (STOCK,): 1}
        return
    assert gauge == {(NIGHTLY,): 1, (REPORT,): 1, (STOCK,): 1}

    # The plugin schedules the stopped job again (re-activated): it is no longer stopped;
    # then it is unscheduled on purpose (deactivated): its latest action is canceled, which
    # is intentional, and it stays out of the gauge.
    again = store.create(NIGHTLY, schedule=schedules.INTERVAL, recurrence=60)
    exporter.scrape()
    assert (NIGHTLY,) not in by_label(exporter, catalog.RECURRING_HOOKS_STOPPED, "hook")
    assert store.unschedule_all(NIGHTLY) == 1
    exporter.scrape()
    gauge = by_label(exporter, catalog.RECURRING_HOOKS_STOPPED, "hook")
    assert gauge == {(REPORT,): 1, (STOCK,): 1}
    assert {hook for (hook,), _ in gauge.items()} == table_truth(store)
    assert store.hook_of(again) == NIGHTLY


def test_translated_runs_are_counted_as_in_english(
    store_factory: Callable[[str], ActionSchedulerStore],
    follow: Follow,
) -> None:
    """Completions, failures and starts of a German site equal those of the same history
    in English (only the failure reasons are unknown there)."""
    totals: list[dict[str, float]] = []
    for prefix, messages in (("en_", ENGLISH), ("de_", GERMAN)):
        store = store_factory(prefix)
        store.messages = messages
        exporter = follow(table_prefix=prefix, heavy_interval=0)
        exporter.scrape()
        write_history(store)
        exporter.scrape()
        totals.append(
            {
                metric.name: exporter.total(metric)
                for metric in (catalog.STARTED, catalog.COMPLETED, catalog.FAILED)
            }
        )
    english, german = totals
    assert english == german


def test_the_history_is_the_same_when_the_clock_ticks_while_it_is_written(
    store_factory: Callable[[str], ActionSchedulerStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine a second passes between writing a run and Action Scheduler's
    consistently-failing check; the history (and so what the tests above compare) must
    not change with it. Here the database's clock moves a second at every reading."""
    still = write_history(store_factory("still_"))
    read_clock = ActionSchedulerStore.now
    ticks = itertools.count(1)

    def ticking(self: ActionSchedulerStore) -> dt.datetime:
        moved = 0 if self._frozen is not None else next(ticks)
        return read_clock(self) + dt.timedelta(seconds=moved)

    monkeypatch.setattr(ActionSchedulerStore, "now", ticking)
    assert write_history(store_factory("ticking_")) == still


def test_a_site_learns_its_start_words_from_known_runners_in_a_later_scrape(
    store: ActionSchedulerStore, follow: Follow
) -> None:
    """A German start by a plugin's own runner, read before any start by a known one,
    is learned once a known runner's start has been seen."""
    store.messages = GERMAN
    exporter = follow()
    exporter.scrape()
    custom = store.create("import_products")
    store.start(custom, via="Queue Worker Plus")
    exporter.scrape()
    # alone: an in-progress action's latest row is its start; its runner is not known
    assert by_label(exporter, catalog.STARTED_BY_RUNNER, "runner")[("other",)] == 1
    store.complete(custom, via="Queue Worker Plus")
    known = store.create("import_products")
    store.run_action(known, via="WP Cron")
    again = store.create("import_products")
    store.run_action(again, via="Queue Worker Plus")
    exporter.scrape()
    runs = by_label(exporter, catalog.STARTED_BY_RUNNER, "runner")
    assert runs[("wp_cron",)] == 1 and runs[("other",)] == 2
    assert exporter.total(catalog.COMPLETED) == 3
    assert exporter.total(catalog.STARTED) == 3


def test_dedicated_workers_setting_is_exported(follow: Follow, store: ActionSchedulerStore) -> None:
    for overrides, value in (
        ({}, 0),
        ({"workers": (WorkersConfig("shop", "shop-worker"),)}, 1),
        ({"workers": (WorkersConfig("shop", "shop-worker"),), "dedicated_workers": False}, 0),
        ({"dedicated_workers": True}, 1),
    ):
        exporter = follow(**overrides)
        exporter.scrape()
        assert exporter.total(catalog.DEDICATED_WORKERS) == value, overrides
