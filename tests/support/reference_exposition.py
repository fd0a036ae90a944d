"""The exposition as prometheus-client's own encoders write it: the tests' reference for
the exporter's writer (actionscheduler_exporter/exposition/writer.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as parse_text
from prometheus_client.registry import Collector as PrometheusCollector

from actionscheduler_exporter.exposition.render import BUILD_LABELS
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult

_PROCESS = ProcessCollector(registry=None)


def families(results: Sequence[SiteResult]) -> list[Metric]:
    """One family per catalog entry with samples from every site, in catalog order."""
    built = {metric.name: Metric(metric.name, metric.help, metric.kind) for metric in catalog.ALL}
    for result in results:
        site_labels = {"site": result.label, **dict(result.labels)}
        for item in result.samples:
            if item.metric in catalog.NATIVE_ONLY:
                continue  # native histograms only: no text form
            built[item.metric.name].add_sample(
                item.name, {**site_labels, **dict(item.labels)}, item.value
            )
    built[catalog.BUILD_INFO.name].add_sample(
        catalog.BUILD_INFO.sample_name, dict(BUILD_LABELS), 1.0
    )
    return [family for family in built.values() if family.samples]


class _Snapshot(PrometheusCollector):
    def __init__(self, metric_families: Iterable[Metric]) -> None:
        self._families = list(metric_families)

    def collect(self) -> Iterator[Metric]:
        yield from self._families
        yield from _PROCESS.collect()


def render_with_library(results: Sequence[SiteResult], accept: str | None) -> tuple[bytes, str]:
    encoder, content_type = choose_encoder(accept or "")
    return encoder(_Snapshot(families(results))), content_type


def parsed(body: bytes, content_type: str) -> list[tuple[Any, ...]]:
    """Families as a parser reads them (the process's own, whose values move, left out)."""
    text = body.decode()
    parse = text_string_to_metric_families if "openmetrics" in content_type else parse_text
    return [
        (
            family.name,
            family.type,
            family.documentation,
            sorted((item.name, sorted(item.labels.items()), item.value) for item in family.samples),
        )
        for family in parse(text)
        if not family.name.startswith("process_")
    ]
