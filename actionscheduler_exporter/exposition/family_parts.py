"""Each family's pieces, gathered site by site and given out in parts: how the protobuf
encoder holds a scrape's exposition (each site's fields of a family, kept from scrape to
scrape as the text writer's texts are: `kept_texts`); the text writer gives out its texts
in parts of `SITES_PER_PART` sites too.

A family needs every site, so a scrape's families are gathered whole before the first
is given out. A part is a list of its pieces, not joined: the pieces are the ones kept
from the last scrape while a site's family does not change, so a part of the same pieces
is known at once (`web.kept_gzip` sends it as it was deflated then); a part is joined
only where it is coded (deflated anew, or sent as it is). Neither a family (a thousand
stores' largest text is 3.3 MB) nor the answer is ever joined whole, which held the
answer twice more (that body, and the socket's buffer of it), 31 MiB over a thousand
stores' resident size at every scrape (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from actionscheduler_exporter.metrics.catalog import MetricDef

SITES_PER_PART = 64

# A part of the exposition: its pieces, whose bytes follow one another.
Part = list[bytes]


class Gathered:
    """Each family's pieces in the sites' order. The sites of a run with the same
    families in the same places (most of a fleet: `kept_texts.Layout`) are turned into
    families at once, in C (`zip`), rather than piece by piece: a thousand stores' 46,000
    pieces took a third of the text writer's own time."""

    def __init__(self) -> None:
        self._families: dict[str, list[bytes]] = {}  # by family name
        self._metrics: tuple[MetricDef, ...] = ()  # the families of the run's sites
        self._run: list[Sequence[bytes]] = []

    def add(self, metrics: tuple[MetricDef, ...], pieces: Sequence[bytes]) -> None:
        """A site's piece of each of `metrics`, in that order."""
        if metrics is not self._metrics:
            self._end_run()
            self._metrics = metrics
        self._run.append(pieces)

    def finished(self) -> dict[str, list[bytes]]:
        """Each family's pieces, by its name, once every site is added."""
        self._end_run()
        return self._families

    def _end_run(self) -> None:
        if not self._run:
            return
        families = self._families
        for metric, column in zip(self._metrics, zip(*self._run, strict=True), strict=True):
            found = families.get(metric.name)
            if found is None:
                families[metric.name] = list(column)
            else:
                found += column
        self._run = []


def in_parts(family: list[bytes], first: Sequence[bytes] = ()) -> Iterator[Part]:
    """A family's pieces, `SITES_PER_PART` sites' a part, after `first` (its head) in
    the first part."""
    yield [*first, *family[:SITES_PER_PART]]
    for start in range(SITES_PER_PART, len(family), SITES_PER_PART):
        yield family[start : start + SITES_PER_PART]
