"""Cardinality stays bounded whatever the store holds, and hostile names reach a real
Prometheus intact."""

from __future__ import annotations

from collections.abc import Callable

from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.metrics import catalog
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.support.http_server import RunningExporter
from tests.support.prometheus import Prometheus, promtool
from tests.support.scenarios import NASTY_HOOKS
from tests.support.waiting import wait_until


def test_5000_hooks_and_1000_groups_give_a_bounded_number_of_series(
    store: ActionSchedulerStore, scrape: Scrape, site: Callable[..., SiteConfig]
) -> None:
    store.create_failed_many(
        [(f"plugin_hook_{index:04d}", f"group_{index % 1000:03d}") for index in range(5000)]
    )
    (result,) = scrape(site(top_hooks=20, top_groups=20))
    failed = [s for s in result.samples if s.metric is catalog.FAILED_BY_HOOK]
    by_group = [s for s in result.samples if s.metric is catalog.ACTIONS_BY_GROUP]
    assert len(failed) == 21  # 20 hooks and "other"
    assert sum(s.value for s in failed) == 5000
    assert {dict(s.labels)["group"] for s in by_group} <= {
        *(f"group_{index:03d}" for index in range(1000)),
        "other",
    }
    assert len({dict(s.labels)["group"] for s in by_group}) == 21
    assert result.value(catalog.FOLDED_LABEL_VALUES.name, label="hook") == 4980
    assert result.value(catalog.FOLDED_LABEL_VALUES.name, label="group") == 980
    body, _ = render([result], None)
    assert len(body.splitlines()) < 400
    import subprocess

    assert (
        subprocess.run([promtool(), "check", "metrics"], input=body, capture_output=True).returncode
        == 0
    )


def test_hostile_hook_names_reach_prometheus_intact(
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
    exporter_http: Callable[..., RunningExporter],
) -> None:
    for hook in NASTY_HOOKS:
        store.run_action(store.create(hook), outcome=lambda hook: "failed")
    running = exporter_http(site(top_hooks=100))
    prometheus = Prometheus([f"127.0.0.1:{running.port}"])
    try:
        hooks: set[str] = set()

        def all_arrived() -> bool:
            nonlocal hooks
            hooks = {
                series["metric"]["hook"]
                for series in prometheus.query("actionscheduler_failed_actions")
            }
            return hooks == set(NASTY_HOOKS)

        wait_until(all_arrived, 30, interval=0.5)
        targets = prometheus.api("targets")["activeTargets"]
    finally:
        prometheus.stop()
    assert hooks == set(NASTY_HOOKS)
    assert targets[0]["health"] == "up", targets[0].get("lastError")
