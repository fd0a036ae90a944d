"""Turns round results into the exposition, built fresh for each scrape, in the format the
scraper asked for: OpenMetrics 1.0.0, the Prometheus text format (0.0.4, or 1.0.0, which
reads the same for the names this exporter uses) or the protobuf format, the one that
carries native histograms (Prometheus asks for it first when they are enabled)."""

from __future__ import annotations

import functools
import platform
from collections.abc import Iterator, Sequence
from itertools import chain

from actionscheduler_exporter import __version__
from actionscheduler_exporter.exposition import protobuf, writer
from actionscheduler_exporter.exposition.family_parts import Gathering, Part, joined
from actionscheduler_exporter.exposition.process import process_samples
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Labels
from actionscheduler_exporter.rounds.result import SiteResult

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT = "text/plain; version=0.0.4; charset=utf-8"
TEXT_1 = "text/plain; version=1.0.0; charset=utf-8"
PROTOBUF = (
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
)
_PROTOBUF_MEDIA = "application/vnd.google.protobuf"
_PROTOBUF_OPTIONS = {"proto": "io.prometheus.client.MetricFamily", "encoding": "delimited"}
# The text formats have no native histograms: families that exist only as one stay out.
_TEXT_FAMILIES = tuple(metric for metric in catalog.ALL if metric not in catalog.NATIVE_ONLY)

_EOF = b"# EOF\n"
BUILD_LABELS = (("python_version", platform.python_version()), ("version", __version__))


def negotiate(accept: str | None) -> str:
    """The content type to answer with: the most preferred (by q) that is written here.
    A scraper sends the same header every time: parsing Prometheus' (five types with
    their options) took 11 µs per scrape, so a header of a usual size is remembered."""
    if accept is not None and len(accept) > _REMEMBERED_ACCEPT:
        return _negotiated.__wrapped__(accept)
    return _negotiated(accept)


# Longer headers are parsed each time: the cache holds no client's megabytes.
_REMEMBERED_ACCEPT = 1024


@functools.lru_cache(maxsize=64)
def _negotiated(accept: str | None) -> str:
    best, best_q = TEXT, 0.0
    for entry in (accept or "").split(","):
        media, *params = (part.strip() for part in entry.split(";"))
        options = dict(param.partition("=")[::2] for param in params)
        try:
            q = float(options.get("q", "1"))
        except ValueError:
            continue
        version = options.get("version")
        if media == _PROTOBUF_MEDIA and all(
            options.get(name) == wanted for name, wanted in _PROTOBUF_OPTIONS.items()
        ):
            offered = PROTOBUF
        elif media == "application/openmetrics-text" and version in (None, "1.0.0"):
            offered = OPENMETRICS
        elif media == "text/plain" and version == "1.0.0":
            offered = TEXT_1
        elif media in ("text/plain", "*/*", "text/*") and version in (None, "0.0.4"):
            offered = TEXT
        else:
            continue
        if q > best_q:
            best, best_q = offered, q
    return best


def render(
    results: Sequence[SiteResult],
    accept: str | None,
    exporter: Sequence[tuple[catalog.MetricDef, Labels, float]] = (),
) -> tuple[bytes, str]:
    """The exposition body and its content type, negotiated from the Accept header;
    `exporter`: the server's own samples without a site (how the last reload went)."""
    parts, content_type = render_parts(results, accept, exporter)
    return b"".join(chain.from_iterable(parts)), content_type


def render_parts(
    results: Sequence[SiteResult],
    accept: str | None,
    exporter: Sequence[tuple[catalog.MetricDef, Labels, float]] = (),
    others: Sequence[Gathering] = (),
) -> tuple[Iterator[Part], str]:
    """`render`'s body in parts, written as they are taken, so that a large exposition
    is never joined into one body (`writer.families`, `protobuf.families`); a part is
    its pieces, mostly kept from the last scrape (`family_parts`). `others`: the sites
    of the exporter's helper processes, gathered there for the same content type
    (`gather`)."""
    content_type = negotiate(accept)
    return answer_parts(gather(results, content_type), content_type, exporter, others), content_type


def gather(results: Sequence[SiteResult], content_type: str, *, apart: bool = False) -> Gathering:
    """The families of `results` for an answer of `content_type`: this process's part
    of the answer (`answer_parts`), or what a helper process sends; `apart`: sites
    gathered beside this process's own in the same scrape (a helper's, reported as
    down), with kept texts of their own. The other format's kept texts are let go of (a
    scraper asks for one format)."""
    if content_type == PROTOBUF:
        writer.forget()
        return protobuf.gather(results, apart=apart)
    protobuf.forget()
    return writer.gather(results, apart=apart)


def answer_parts(
    own: Gathering,
    content_type: str,
    exporter: Sequence[tuple[catalog.MetricDef, Labels, float]] = (),
    others: Sequence[Gathering] = (),
) -> Iterator[Part]:
    """The answer of `content_type` in parts: the sites of `own` (`gather`) and of
    `others` after them in each family, the exporter's own samples, the process's."""
    gathering = joined(own, others)
    extra = [(catalog.BUILD_INFO, BUILD_LABELS, 1.0), *exporter]
    if content_type == PROTOBUF:
        yield from protobuf.written(gathering, catalog.ALL, extra)
        yield Part([protobuf.encode_process(process_samples())])  # coded anew each time
        return
    openmetrics = content_type == OPENMETRICS
    yield from writer.written(gathering, _TEXT_FAMILIES, extra, openmetrics=openmetrics)
    process = writer.encode_process(process_samples(), openmetrics=openmetrics)
    yield Part([process.encode()])
    if openmetrics:
        yield Part([_EOF], (_EOF,))
