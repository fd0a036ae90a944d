"""The exposition as prometheus-client's own encoders write it: the tests' reference for
the exporter's writer (exporter/exposition/writer.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector as PrometheusCollector

from exporter.exposition.render import BUILD_LABELS
from exporter.metrics import catalog
from exporter.rounds.result import SiteResult

_PROCESS = ProcessCollector(registry=None)


def families(results: Sequence[SiteResult]) -> list[Metric]:
    """One family per catalog entry with samples from every site, in catalog order."""
    built = {metric.name: Metric(metric.name, metric.help, metric.kind) for metric in catalog.ALL}
    for result in results:
        site_labels = {"site": result.site, **dict(result.labels)}
        for item in result.samples:
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
