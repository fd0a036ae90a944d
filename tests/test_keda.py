"""The chart's KEDA query against a real Prometheus scraping the exporter: it returns the
backlog the writer created, and the replicas KEDA would run follow from it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from actionscheduler_exporter.config import SiteConfig
from testbed.store import ActionSchedulerStore
from tests.support.autoscaling import keda_replicas, wait_for_value
from tests.support.helm_chart import ALL_ON, find, merged, render
from tests.support.http_server import RunningExporter
from tests.support.operator_scrape import service_monitor_scrape_configs
from tests.support.prometheus import Prometheus


def test_scaled_object_query_drives_the_replicas(
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
    exporter_http: Callable[..., RunningExporter],
) -> None:
    values = merged(
        ALL_ON,
        **{
            "keda.prometheus.threshold": 40,
            "keda.prometheus.activationThreshold": 5,
            "keda.minReplicaCount": 0,
            "keda.maxReplicaCount": 4,
            "worker.concurrentBatches": 5,
        },
    )
    objects = render(values)
    scaled = find(objects, "ScaledObject")["spec"]
    (trigger,) = scaled["triggers"]
    query = trigger["metadata"]["query"]
    threshold = float(trigger["metadata"]["threshold"])
    activation = float(trigger["metadata"]["activationThreshold"])

    exporter = exporter_http(site(name="shop"))
    # Scraped as the Prometheus Operator scrapes the chart's ServiceMonitor: the query
    # selects the release's exporter by the target labels the operator gives it.
    prometheus = Prometheus([], scrape_configs=operator_scrape(objects, exporter, "shop"))
    try:
        # Future-scheduled work never counts.
        later = store.now().replace(year=store.now().year + 1)
        for index in range(500):
            store.create(
                "woocommerce_scheduled_subscription_payment", scheduled=later, args=[index]
            )
        observed = []
        for backlog, expected_replicas in ((3, 0), (100, 3), (1000, 4)):
            due = _due(store)
            for index in range(backlog - due):
                store.create("woocommerce_deliver_webhook_async", args=[index])
            value = wait_for_value(prometheus, query, backlog)
            replicas = keda_replicas(
                value, threshold, activation, scaled["minReplicaCount"], scaled["maxReplicaCount"]
            )
            observed.append((backlog, value, replicas))
            assert value == backlog
            assert replicas == expected_replicas, observed
    finally:
        prometheus.stop()


def _due(store: ActionSchedulerStore) -> int:
    with store.connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM wp_actionscheduler_actions WHERE status = 'pending'"
            " AND scheduled_date_gmt <= UTC_TIMESTAMP()"
        )
        return int(cursor.fetchone()[0])


def operator_scrape(
    objects: list[dict[str, Any]], exporter: RunningExporter, release: str
) -> list[dict[str, Any]]:
    return service_monitor_scrape_configs(
        find(objects, "ServiceMonitor"),
        find(objects, "Service", "exporter"),
        f"127.0.0.1:{exporter.port}",
        f"{release}-actionscheduler-exporter-6f7d9c8b5-abcde",
        "exporter",
    )


def test_two_stores_in_one_cluster_each_scale_on_their_own_backlog(
    store_factory: Callable[[str], ActionSchedulerStore],
    site: Callable[..., SiteConfig],
    exporter_http: Callable[..., RunningExporter],
) -> None:
    """Issue 16: two releases, one per store, whose sites are both named "wordpress" (the
    database's name, the default): each ScaledObject's query sees its own exporter only.
    Rules and dashboards are installed once per cluster (in one release)."""
    stores = {"store-a": store_factory("wp_"), "store-b": store_factory("wp2_")}
    backlogs = {"store-a": 7, "store-b": 30}
    one_site = {"config": {"sites": [{"name": "wordpress", "database": "wordpress"}]},
                "keda.site": "wordpress", "worker.site": "wordpress"}  # fmt: skip
    releases = {
        "store-a": render(merged(ALL_ON, **one_site), namespace="shops", release="store-a"),
        "store-b": render(
            merged(ALL_ON, **one_site, **{"prometheusRule.enabled": False,
                                          "dashboards.enabled": False}),
            namespace="shops", release="store-b",
        ),
    }  # fmt: skip
    every = [obj for objects in releases.values() for obj in objects]
    assert [o["kind"] for o in every].count("PrometheusRule") == 1
    uids = [
        json.loads(text)["uid"]
        for o in every
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith(("-overview", "-hooks"))
        for text in o["data"].values()
    ]
    assert len(uids) == len(set(uids)) == 2
    names = [(o["kind"], o["metadata"]["name"]) for o in every]
    assert len(names) == len(set(names))

    configs = []
    for release, prefix in (("store-a", "wp_"), ("store-b", "wp2_")):
        for index in range(backlogs[release]):
            stores[release].create("woocommerce_deliver_webhook_async", args=[index])
        exporter = exporter_http(site(name="wordpress", table_prefix=prefix))
        configs += operator_scrape(releases[release], exporter, release)
    prometheus = Prometheus([], scrape_configs=configs)
    try:
        for release, objects in releases.items():
            (trigger,) = find(objects, "ScaledObject")["spec"]["triggers"]
            query = trigger["metadata"]["query"]
            assert wait_for_value(prometheus, query, backlogs[release]) == backlogs[release]
    finally:
        prometheus.stop()
