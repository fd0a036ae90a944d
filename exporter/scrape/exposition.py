"""Turns round results into the exposition, built fresh for each scrape.

The formats Prometheus asks for (text 0.0.4 and 1.0.0, OpenMetrics 1.0.0) are written by
`textformat` from the catalog; any other that prometheus-client can negotiate goes
through its own encoders, from the same samples turned into its metric families.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector as PrometheusCollector

from exporter import __version__, catalog
from exporter.scrape import textformat
from exporter.scrape.result import SiteResult

_WRITTEN_HERE = (
    "text/plain; version=0.0.4",
    "text/plain; version=1.0.0",
    "application/openmetrics-text; version=1.0.0",
)

_PROCESS = ProcessCollector(registry=None)
_BUILD_LABELS = (("python_version", platform.python_version()), ("version", __version__))


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
        catalog.BUILD_INFO.sample_name,
        dict(_BUILD_LABELS),
        1.0,
    )
    return [family for family in built.values() if family.samples]


class _Snapshot(PrometheusCollector):
    """A registry-shaped view of one scrape's families (and the process's own metrics),
    for prometheus-client's encoders."""

    def __init__(self, metric_families: Iterable[Metric]) -> None:
        self._families = list(metric_families)

    def collect(self) -> Iterator[Metric]:
        yield from self._families
        yield from _PROCESS.collect()


def render(results: Sequence[SiteResult], accept: str | None) -> tuple[bytes, str]:
    """The exposition body and its content type, negotiated from the Accept header."""
    encoder, content_type = choose_encoder(accept or "")
    if not content_type.startswith(_WRITTEN_HERE):
        return render_with_library(results, accept)
    openmetrics = content_type.startswith("application/openmetrics-text")
    build = (catalog.BUILD_INFO, _BUILD_LABELS, 1.0)
    body = textformat.encode(results, catalog.ALL, [build], openmetrics=openmetrics)
    # The process's few samples (and OpenMetrics' closing "# EOF") come from the library.
    return body.encode() + encoder(_Snapshot([])), content_type


def render_with_library(results: Sequence[SiteResult], accept: str | None) -> tuple[bytes, str]:
    """The same, entirely by prometheus-client's encoders (slower; the tests' reference)."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(_Snapshot(families(results))), content_type
