"""The exposition is valid (promtool), complete (every family emitted) and documented."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.config.model import GroupConfig, WorkersConfig
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.scrape.coordinator import Coordinator
from testbed import schedules
from testbed.accept_headers import PROMETHEUS_ACCEPT
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.support.fake_kubernetes import FakeKubernetes, kubernetes_config
from tests.support.prometheus import promtool
from tests.support.reference_exposition import parsed, render_with_library
from tests.support.scenarios import NASTY_HOOKS, killed_worker_after_cleaner
from tests.support.waiting import wait_until


def first_sample_name(metric: catalog.MetricDef) -> str:
    return metric.sample_name + ("_bucket" if metric.kind == "histogram" else "")


# Emitted for a site with a read replica: tests/test_replica.py checks them.
NEED_A_REPLICA = {catalog.REPLICA_LAG, catalog.REPLICA_USED}
# The web server's own, without labels (render's `exporter=`): tests/test_web_toolkit.py.
SERVED_BY_THE_WEB = {
    catalog.CONFIG_LAST_RELOAD_SUCCESSFUL,
    catalog.CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP,
}


def test_every_family_is_emitted_and_only_declared_ones(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig], api: FakeKubernetes
) -> None:
    coordinator = Coordinator(
        ExporterConfig(
            sites=(
                site(
                    concurrent_batches_limit=2,
                    labels=(("team", "checkout"),),
                    heavy_interval=0.05,
                    workers=(WorkersConfig("shop", "shop-worker"),),
                    groups=(GroupConfig("reports", oldest_due_warning=3600.0),),
                    kubernetes=kubernetes_config(api),
                ),
            )
        )
    )
    try:
        coordinator.scrape()  # the log cursor starts here
        killed_worker_after_cleaner(store)
        store.run_batch(3, outcome=lambda hook: "boom")
        store.cancel(store.create("woocommerce_cancel_unpaid_orders"))
        store.log(store.create("translated_hook"), "Aktion erstellt")
        with store.seconds_ago(60):
            nightly = store.create("shop_nightly_sync", schedule=schedules.INTERVAL)
        assert store.run_recurring(nightly, "boom", threshold=1) is None
        (result,) = coordinator.scrape()

        # The heavy tier refreshes in the background: wait until it has seen the changes.
        def refreshed() -> bool:
            nonlocal result
            (result,) = coordinator.scrape()
            return result.value(catalog.ACTIONS.name, status="canceled") == 1

        assert wait_until(refreshed, 10)
    finally:
        coordinator.close()
    body, _ = render([result], None)
    text = body.decode()
    for metric in catalog.ALL:
        if metric in NEED_A_REPLICA | SERVED_BY_THE_WEB | catalog.NATIVE_ONLY:
            continue
        assert re.search(rf"^{first_sample_name(metric)}\{{", text, flags=re.MULTILINE), metric.name
    emitted = set(re.findall(r"^(actionscheduler_\w+)\{", text, flags=re.MULTILINE))
    histograms = {
        f"{metric.name}_{suffix}"
        for metric in catalog.ALL
        if metric.kind == "histogram" and metric not in catalog.NATIVE_ONLY
        for suffix in ("sum", "count")
    }
    declared = {
        first_sample_name(metric)
        for metric in catalog.ALL
        if metric not in NEED_A_REPLICA | SERVED_BY_THE_WEB | catalog.NATIVE_ONLY
    }
    assert emitted == declared | histograms
    assert 'team="checkout"' in text


def test_exposition_passes_promtool_with_hostile_hook_names(
    store: ActionSchedulerStore, scrape: Scrape, site: Callable[..., object]
) -> None:
    for hook in NASTY_HOOKS:
        store.create(hook, group=hook[:100])
    store.run_batch(25, outcome=lambda hook: "failed")
    (result,) = scrape(site(top_hooks=100))
    body, _ = render([result], None)
    checked = subprocess.run(
        [promtool(), "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    assert checked.returncode == 0, checked.stderr.decode() + checked.stdout.decode()
    # promtool reads only the text format; OpenMetrics is checked by its reference parser.
    body, content_type = render([result], "application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    parsed = list(text_string_to_metric_families(body.decode()))  # type: ignore[no-untyped-call]
    hooks = {
        s.labels["hook"]
        for family in parsed
        if family.name == catalog.FAILED_BY_HOOK.name
        for s in family.samples
    }
    assert hooks == set(NASTY_HOOKS)
    failed = {dict(s.labels)["hook"] for s in result.samples if s.metric is catalog.FAILED_BY_HOOK}
    assert failed == set(NASTY_HOOKS)


def test_top_n_folding_bounds_the_series(
    store: ActionSchedulerStore, scrape: Scrape, site: Callable[..., object]
) -> None:
    for index in range(12):
        for _ in range(index + 1):
            store.create(f"hook_{index:02d}", group=f"group_{index:02d}")
    store.run_batch(200, outcome=lambda hook: "failed")
    (result,) = scrape(site(top_hooks=3, top_groups=4))
    failed = {
        dict(s.labels)["hook"]: s.value
        for s in result.samples
        if s.metric is catalog.FAILED_BY_HOOK
    }
    assert failed == {"hook_11": 12, "hook_10": 11, "hook_09": 10, "other": sum(range(1, 10))}
    groups = {
        dict(s.labels)["group"] for s in result.samples if s.metric is catalog.ACTIONS_BY_GROUP
    }
    assert groups == {"group_11", "group_10", "group_09", "group_08", "other"}
    assert result.value(catalog.FOLDED_LABEL_VALUES.name, label="hook") == 9
    assert result.value(catalog.FOLDED_LABEL_VALUES.name, label="group") == 8


@pytest.mark.parametrize("accept", [None, "text/plain; version=1.0.0", PROMETHEUS_ACCEPT])
def test_the_written_exposition_reads_as_prometheus_clients_own(
    store: ActionSchedulerStore, scrape: Scrape, site: Callable[..., SiteConfig], accept: str | None
) -> None:
    for hook in NASTY_HOOKS:
        store.run_action(store.create(hook), outcome=lambda hook: "boom")
    store.create("woocommerce_deliver_webhook_async", group='group "quoted"\\n')
    results = scrape(site(heavy_interval=0, labels=(("team", 'a"b\\c'),)))
    body, content_type = render(results, accept)
    reference, reference_type = render_with_library(results, accept)
    assert content_type.split(";")[:2] == reference_type.split(";")[:2]
    assert parsed(body, content_type) == parsed(reference, reference_type)
    assert body.endswith(b"# EOF\n") == ("openmetrics" in content_type)
