"""Each site's samples of each family, written once and taken again while they stay the
same: what the text writer and the protobuf encoder keep from scrape to scrape.

A quiet store's samples are five in six the same from scrape to scrape (the heavy tier's
and the cached readings' are the same objects, a hot reading's often equal), and only
about 6 of its 46 families change (ages, durations). Each format keeps, per site, the
samples it wrote, where each family's are (a layout, shared by the sites with the same),
and each family's encoding; at the next scrape the samples that are no longer the same
objects are found in C, compared by value, and only the families that changed are
encoded again. A family that changed is not kept (it mostly changes again), unless a
format of one line per sample (the text formats) changed few of its lines: then the
next scrape writes only the lines that changed again into it (a store's collectors'
durations, of which one changes at each scrape).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from operator import is_not
from typing import Generic, TypeVar, cast

from actionscheduler_exporter.exposition.family_parts import Family, Gathered
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Sample

# A site as its format encodes it: its label pairs (text for the text formats, bytes for
# protobuf), which key its kept encodings too.
Site = TypeVar("Site", bound=Hashable)
# Encodes a site's samples of one family (at the given places) in a format.
FamilyWriter = Callable[[list[Sample], tuple[int, ...], Site], bytes]
# Whether a sample made anew encodes as the one kept does.
SameSample = Callable[[Sample, Sample], bool]

# Layouts kept per format: past the bound, a site's own is made at each full writing.
MAX_LAYOUTS = 4096
# A changed family's text of one line per sample is kept, for its lines to be written
# into, when it has at least this many lines and at most a half of them changed.
SPLICED_FROM = 4


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each family's samples are in a site's list: sites with the same families
    in the same places (most of a fleet) share one."""

    key: tuple[MetricDef, ...]  # the metric of each sample, in order
    metrics: tuple[MetricDef, ...]  # the families, in the order they first come
    positions: tuple[tuple[int, ...], ...]  # each family's samples' places
    family_at: tuple[int, ...]  # the family of each place (an index into `metrics`)
    line_at: tuple[int, ...]  # each place's index among its family's samples
    # The families of at least `SPLICED_FROM` samples, whose changed lines may be written
    # into their kept text.
    spliceable: frozenset[int]


@dataclass(slots=True)
class SiteText:
    """A site's samples as the last scrape wrote them, and each family's encoding, kept
    while its samples stay the same: not a family's that changed at that scrape (its
    ages, its durations), which will mostly change again (2.9 of a thousand stores'
    16.2 MiB of texts)."""

    samples: tuple[Sample, ...]
    layout: Layout
    texts: list[bytes | None]  # aligned with `layout.metrics`
    unkept: set[int]  # the families whose text is not kept (None in `texts`)


def same_line(old: Sample, new: Sample) -> bool:
    """Whether two samples of one metric write the same line: equal values of one type
    (an int is written "8", a float "8.0") and, for zeros, of one sign."""
    value, old_value = new.value, old.value
    if value != old_value or type(value) is not type(old_value):
        return False
    if not value and math.copysign(1.0, value) != math.copysign(1.0, old_value):
        return False
    return new.labels == old.labels and new.suffix == old.suffix


class KeptTexts(Generic[Site]):
    """One format's encodings of each site of the last scrape, by the site's label
    pairs. Only the last scrape's sites are held, and a site's old encodings are let go
    of as it is written anew: at most one exposition's (13.3 MiB of text for a thousand
    quiet stores), which a scrape held anyway until it was given out."""

    def __init__(
        self,
        write_family: FamilyWriter[Site],
        same: SameSample = same_line,
        *,
        lines: bool = False,
    ) -> None:
        """`lines`: `write_family` writes each sample as one line, ending in a newline,
        whatever the others (the text formats): a family's text may then be kept with a
        few of its lines changed, and those written into it at the next scrape."""
        self._write_family = write_family
        self._same = same
        self._lines = lines
        self._sites: dict[Site, SiteText] = {}
        # Counts the scrapes kept (and forgotten): which kept texts a site's `fresh`
        # families are told against (`taken`), for a coding that keeps its own.
        self.generation = 0
        # Sites' layouts by the metrics of their samples, in order (definitions hash by
        # identity): those the last scrape's sites have (`keep`).
        self.layouts: dict[tuple[MetricDef, ...], Layout] = {}
        self.max_layouts = MAX_LAYOUTS

    def take(self) -> dict[Site, SiteText]:
        """The last scrape's encodings, now the caller's: a scrape whose sites are
        written meanwhile (in another thread) finds none, and writes every line."""
        taken, self._sites = self._sites, {}
        self.generation += 1
        return taken

    def keep(self, sites: dict[Site, SiteText]) -> None:
        """Keeps a scrape's encodings, and only the layouts its sites have: a site's
        layout changes with its data (a hook that fails, a group that comes), and the
        layouts no site has any more are let go of."""
        self._sites = sites
        self.generation += 1
        layouts = {id(site.layout): site.layout for site in sites.values()}
        if len(layouts) < len(self.layouts):
            self.layouts = {layout.key: layout for layout in layouts.values()}

    def forget(self) -> None:
        """Lets go of the encodings and their layouts: the scraper asks for another
        format."""
        self._sites = {}
        self.layouts = {}
        self.generation += 1

    @property
    def sites(self) -> dict[Site, SiteText]:
        return self._sites

    def families(
        self, sites: Iterable[tuple[Site, list[Sample]]]
    ) -> tuple[dict[str, Family], tuple[int, int]]:
        """Each family's pieces of every site (each site's samples by its key, in order),
        the last scrape's taken again where they encode the same; and the generations of
        the kept texts taken and left (`family_parts.Part.kept`). A site whose key comes
        twice is not kept: neither is taken for the other's at the next scrape."""
        gathered = Gathered()
        taken = self.generation
        last = self.take()
        twice: set[Site] = set()
        kept: dict[Site, SiteText] = {}
        for site, samples in sites:
            if site in kept:
                twice.add(site)
            kept[site], texts, fresh = self.site_texts(samples, site, last.pop(site, None))
            gathered.add(kept[site].layout.metrics, texts, site, fresh)
        for site in twice:
            del kept[site]
        self.keep(kept)
        return gathered.finished(), (taken, self.generation)

    def site_texts(
        self, samples: list[Sample], site: Site, last: SiteText | None
    ) -> tuple[SiteText, list[bytes], Collection[int] | None]:
        """What to keep of the site for the next scrape, its encoding of each family,
        and the families written anew (None: all): the last scrape's encodings for the
        families whose samples encode the same, the others written anew (all of them for
        a site new, or whose samples are not in the same places). The others' are the
        same objects as at the last scrape (`web.kept_gzip` keeps a part's coding while
        none of its sites wrote its family anew)."""
        now = list(samples)
        if last is not None:
            changed = self._changed_families(last, now)
            if changed is not None:
                return self._changed_texts(last, now, changed, site)
        layout = self._layout_of(now)
        write = self._write_family
        texts: list[bytes | None] = [write(now, places, site) for places in layout.positions]
        return SiteText(tuple(now), layout, texts, set()), cast(list[bytes], texts), None

    def _changed_texts(
        self, last: SiteText, now: list[Sample], changed: dict[int, list[int]], site: Site
    ) -> tuple[SiteText, list[bytes], Collection[int]]:
        """The site's encodings with the `changed` families (and those not kept) written
        anew, or only their changed lines when their text was kept: a few of a site's,
        the others' taken as they are."""
        layout = last.layout
        written = changed.keys() | last.unkept
        if not written:
            kept_site = SiteText(tuple(now), layout, last.texts, set())
            return kept_site, cast(list[bytes], last.texts), written
        texts = last.texts.copy()
        write = self._write_family
        # The changed families of one line per sample, enough lines, and at most a half
        # of them changed: kept, and written into at the next scrape.
        positions = layout.positions
        spliced: set[int] = (
            {
                family
                for family in layout.spliceable & changed.keys()
                if 2 * len(changed[family]) <= len(positions[family])
            }
            if self._lines
            else set()
        )
        for family in written:
            before = texts[family]
            if before is None or family not in spliced:
                texts[family] = write(now, positions[family], site)
            else:
                lines = before.split(b"\n")
                for place in changed[family]:
                    lines[layout.line_at[place]] = write(now, (place,), site)[:-1]
                texts[family] = b"\n".join(lines)
        kept = texts.copy() if changed else texts
        unkept = changed.keys() - spliced
        for family in unkept:
            kept[family] = None
        return SiteText(tuple(now), layout, kept, unkept), cast(list[bytes], texts), written

    def _changed_families(self, last: SiteText, now: list[Sample]) -> dict[int, list[int]] | None:
        """The families (indices into the layout) whose samples encode otherwise than at
        the last scrape, with the places of those samples, or None when the samples are
        not in the same places. The samples that are the same objects are found in C (a
        scrape's two hundred thousand); those made anew (a few dozen of a site's) are
        compared one by one, and an equal one is replaced in `now` by the one kept (what
        is kept is then only samples whose value changed)."""
        before = last.samples
        if len(before) != len(now):
            return None
        differing = list(map(is_not, before, now))
        differing.append(True)  # the end: found without an exception per site
        end = len(before)
        changed: dict[int, list[int]] = {}
        same = self._same
        family_at = last.layout.family_at
        place = -1
        while (place := differing.index(True, place + 1)) < end:
            old, new = before[place], now[place]
            if old.metric is not new.metric:
                return None
            # Most samples made anew changed their value (an age, a duration): told here,
            # without a call; an equal value may still encode otherwise.
            if old.value == new.value and same(old, new):
                now[place] = old
            else:
                family = family_at[place]
                places = changed.get(family)
                if places is None:
                    changed[family] = [place]
                else:
                    places.append(place)
        return changed

    def _layout_of(self, samples: list[Sample]) -> Layout:
        """The families of a site's samples and their places, shared by the sites with
        the same families in the same places (at most `max_layouts` kept)."""
        key = tuple([item.metric for item in samples])
        layout = self.layouts.get(key)
        if layout is not None:
            return layout
        places: dict[MetricDef, list[int]] = {}
        for place, item in enumerate(samples):
            found = places.get(item.metric)
            if found is None:
                found = places[item.metric] = []
            found.append(place)
        index = {metric: number for number, metric in enumerate(places)}
        family_at = [index[item.metric] for item in samples]
        line_at = [0] * len(samples)
        for found in places.values():
            for line, place in enumerate(found):
                line_at[place] = line
        layout = Layout(
            key,
            tuple(places),
            tuple(tuple(found) for found in places.values()),
            tuple(family_at),
            tuple(line_at),
            frozenset(
                family for family, found in enumerate(places.values()) if len(found) >= SPLICED_FROM
            ),
        )
        if len(self.layouts) < self.max_layouts:
            self.layouts[key] = layout
        return layout
