"""What KEDA does with the chart's queries: the replicas it would run for a value, and the
value a real Prometheus returns once the exporter's scrapes show the expected backlog."""

from __future__ import annotations

import math
from typing import Any

from tests.support.prometheus import Prometheus
from tests.support.waiting import wait_until


def keda_replicas(
    value: float, threshold: float, activation: float, minimum: int, maximum: int
) -> int:
    """What KEDA and the HPA do with an AverageValue metric."""
    if value <= activation and minimum == 0:
        return 0
    return min(maximum, max(minimum, math.ceil(value / threshold), 1))


def scaled_object_replicas(value: float, spec: dict[str, Any]) -> int:
    """keda_replicas() with a rendered ScaledObject's own settings."""
    metadata = spec["triggers"][0]["metadata"]
    return keda_replicas(
        value,
        float(metadata["threshold"]),
        float(metadata["activationThreshold"]),
        spec["minReplicaCount"],
        spec["maxReplicaCount"],
    )


def wait_for_value(prometheus: Prometheus, query: str, expected: float) -> float:
    """The query's value once it equals `expected` (or the last one after 30 s)."""
    value = -1.0

    def reached() -> bool:
        nonlocal value
        result = prometheus.query(query)
        if result:
            value = float(result[0]["value"][1])
        return value == expected

    wait_until(reached, 30, interval=0.5)
    return value
