"""The chart's KEDA query against a real Prometheus scraping the exporter: it returns the
backlog the writer created, and the replicas KEDA would run follow from it."""

from __future__ import annotations

import math
from collections.abc import Callable

from exporter.config import SiteConfig
from testbed.store import ActionSchedulerStore
from tests.helm_chart import ALL_ON, find, merged, render
from tests.http_server import RunningExporter
from tests.prometheus import Prometheus
from tests.waiting import wait_until


def keda_replicas(
    value: float, threshold: float, activation: float, minimum: int, maximum: int
) -> int:
    """What KEDA and the HPA do with an AverageValue metric."""
    if value <= activation and minimum == 0:
        return 0
    return min(maximum, max(minimum, math.ceil(value / threshold), 1))


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
        },
    )
    scaled = find(render(values), "ScaledObject")["spec"]
    (trigger,) = scaled["triggers"]
    query = trigger["metadata"]["query"]
    threshold = float(trigger["metadata"]["threshold"])
    activation = float(trigger["metadata"]["activationThreshold"])

    exporter = exporter_http(site(name="shop"))
    prometheus = Prometheus([f"127.0.0.1:{exporter.port}"])
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
            value = _wait_for_value(prometheus, query, backlog)
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


def _wait_for_value(prometheus: Prometheus, query: str, expected: float) -> float:
    value = -1.0

    def reached() -> bool:
        nonlocal value
        result = prometheus.query(query)
        if result:
            value = float(result[0]["value"][1])
        return value == expected

    wait_until(reached, 30, interval=0.5)
    return value
