"""The catalog is the one description of every family: the docs, the reserved labels and
the sources are derived from it or checked against it."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.config.model import KubernetesConfig, SiteConfig
from actionscheduler_exporter.config.values import label_name
from actionscheduler_exporter.metrics import catalog, docs
from actionscheduler_exporter.sources.source import Source

ROOT = Path(__file__).resolve().parents[2]
# A site with every kind of source: the Kubernetes workers too.
SITE = SiteConfig(name="shop", kubernetes=KubernetesConfig(namespace="shop", selector="app=w"))


def every_source() -> list[Source[Any]]:
    return list(site_sources(SITE).all())


def test_docs_metrics_md_is_what_the_catalog_generates() -> None:
    text = docs.DOC.read_text()
    assert docs.generate(text) == text, "run: python -m actionscheduler_exporter.metrics.docs"
    assert sorted(docs.sections(text)) == sorted(
        {"queue", "settings", "workers", "log", "exporter"}
    )


def test_every_family_is_documented_once() -> None:
    text = docs.DOC.read_text()
    rows = re.findall(r"^\| `(actionscheduler_\w+)` \|", text, flags=re.MULTILINE)
    documented = [name for name in rows if not name.startswith("actionscheduler_exporter_x")]
    expected = [m.name if m.kind in ("gauge", "histogram") else m.sample_name for m in catalog.ALL]
    assert sorted(documented) == sorted(expected)


def test_every_family_has_help_meaning_and_a_unique_name() -> None:
    names = [metric.name for metric in catalog.ALL]
    assert len(names) == len(set(names))
    for metric in catalog.ALL:
        assert metric.help and metric.meaning, metric.name
        assert metric.name.startswith("actionscheduler_"), metric.name


def test_reserved_labels_are_every_label_the_exporter_sets() -> None:
    own = {label for metric in catalog.ALL for label in metric.labels}
    assert own | {"site", "le"} | catalog.TARGET_LABELS == catalog.RESERVED_LABELS
    # The Prometheus Operator's target labels are not the exporter's to use (issue 16).
    assert not own & catalog.TARGET_LABELS
    for label in catalog.RESERVED_LABELS:
        with pytest.raises(ValueError, match="sets itself"):
            label_name(label)


def test_sources_declare_catalog_families_with_their_own_tier() -> None:
    sources = every_source()
    assert len({source.name for source in sources}) == len(sources)
    declared = [metric for source in sources for metric in source.metrics]
    assert set(declared) <= set(catalog.ALL)
    for source in sources:
        tier = getattr(source, "tier", "none")
        for metric in source.metrics:
            if metric is not catalog.FOLDED_LABEL_VALUES:  # heavy, as its only sources are
                assert metric.tier == tier, (source.name, metric.name)


def test_every_family_has_a_producer() -> None:
    """A family is produced by a source, or by the round itself (listed here)."""
    by_round = {
        catalog.UP, catalog.TABLE_EXISTS, catalog.USER_CAN_WRITE, catalog.SCRAPE_DURATION,
        catalog.ERRORS, catalog.KUBERNETES_ERRORS, catalog.KUBERNETES_UP,
        catalog.COLLECTOR_SUCCESS, catalog.COLLECTOR_DURATION, catalog.COLLECTOR_LAST_SUCCESS,
        catalog.BUILD_INFO, catalog.DATABASE_SECONDS, catalog.REPLICA_LAG,
        catalog.REPLICA_USED,
        # the web server's own (web/serving.py), with the build info
        catalog.CONFIG_LAST_RELOAD_SUCCESSFUL, catalog.CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP,
    }  # fmt: skip
    produced = {metric for source in every_source() for metric in source.metrics}
    assert produced | by_round == set(catalog.ALL)


def test_a_sample_refuses_labels_its_family_does_not_declare() -> None:
    from actionscheduler_exporter.metrics.samples import sample

    assert sample(catalog.DUE_ACTIONS, 3, claim="unclaimed").labels == (("claim", "unclaimed"),)
    with pytest.raises(ValueError, match=r"\['hook'\] are not declared"):
        sample(catalog.DUE_ACTIONS, 3, claim="unclaimed", hook="x")
    with pytest.raises(ValueError, match=r"\['claim'\] are missing"):
        sample(catalog.DUE_ACTIONS, 3)


def test_samples_share_their_label_sets_up_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand sites' samples are mostly the same few label sets: one copy of each
    (a tenth of a thousand databases' memory). Past the bound a set is still right, only
    not shared: hook and group names are data, and the table must not grow with them."""
    from actionscheduler_exporter.metrics import samples

    monkeypatch.setattr(samples, "_SHARED_LABELS", {})
    one = samples.sample(catalog.DUE_ACTIONS, 3, claim="unclaimed")
    other = samples.sample(catalog.DUE_ACTIONS, 5, claim="unclaimed")
    assert one.labels is other.labels
    monkeypatch.setattr(samples, "MAX_SHARED_LABELS", 1)
    first = samples.sample(catalog.DUE_ACTIONS, 1, claim="claimed")
    again = samples.sample(catalog.DUE_ACTIONS, 2, claim="claimed")
    assert first.labels == again.labels == (("claim", "claimed"),)
    assert first.labels is not again.labels
    assert samples.sample(catalog.UP, 1).labels == ()


@pytest.mark.parametrize(
    ("given", "expected"),
    [(3, 3.0), (3.0, 3.0), (True, 1.0), (None, 0.0), (0, 0.0), (1023, 1023.0), (Decimal(7), 7.0)],
)
def test_small_whole_values_share_one_float(given: object, expected: float) -> None:
    """Four in five of a thousand stores' held values are small whole numbers: each is
    one float object (120,000 of them were each their own, 2.7 MiB), whatever number it
    was given as, and still a float of that value."""
    from actionscheduler_exporter.metrics import samples

    made = samples.sample(catalog.UP, given)  # type: ignore[arg-type]
    again = samples.sample(catalog.DUE_ACTIONS, expected, claim="unclaimed")
    assert type(made.value) is float
    assert made.value == expected
    assert made.value is again.value


@pytest.mark.parametrize("given", [1024, 2.5, -1, 1e12, -0.0])
def test_other_values_are_floats_of_their_own(given: float) -> None:
    """Past the shared ones a value is made as before: the same number, as a float (a
    negative zero as 0.0, as it always was)."""
    from actionscheduler_exporter.metrics import samples

    made = samples.sample(catalog.UP, given)
    assert type(made.value) is float
    assert made.value == given
    assert math.copysign(1.0, made.value) == 1.0 or given < 0
    nan = samples.sample(catalog.UP, math.nan).value
    assert math.isnan(nan)


_CLAIMED = (("claim", "claimed"),)


@pytest.mark.parametrize(
    "given", [3, 3.0, True, None, 0, -0.0, 1023, Decimal(7), 1024, 2.5, -1, 1e12, math.inf]
)
def test_a_whole_sample_is_the_sample_of_its_value(given: object) -> None:
    """`whole_sample` makes what `Sample` makes of `value_of` the value, for any number."""
    from actionscheduler_exporter.metrics import samples

    made = samples.whole_sample(catalog.DUE_ACTIONS, given, _CLAIMED)  # type: ignore[arg-type]
    expected = samples.Sample(catalog.DUE_ACTIONS, samples.value_of(given), _CLAIMED)  # type: ignore[arg-type]
    assert made == expected and type(made.value) is float
    assert math.copysign(1.0, made.value) == math.copysign(1.0, expected.value)


def test_a_small_whole_sample_is_one_object_while_the_bound_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A count that stays the same is the same object at the next scrape and in every
    store (the writer then takes its line as written); other values, and any past the
    bound, are made each time."""
    from actionscheduler_exporter.metrics import samples

    monkeypatch.setattr(samples, "_WHOLE_SAMPLES", {})
    first = samples.whole_sample(catalog.DUE_ACTIONS, 4, _CLAIMED)
    assert samples.whole_sample(catalog.DUE_ACTIONS, 4.0, _CLAIMED) is first
    assert samples.whole_sample(catalog.DUE_ACTIONS, 4) is not first  # other labels
    assert samples.whole_sample(catalog.IN_PROGRESS, 4) is not first  # another metric
    assert samples.whole_sample(catalog.UP, 2.5) is not samples.whole_sample(catalog.UP, 2.5)
    monkeypatch.setattr(samples, "MAX_WHOLE_SAMPLES", len(samples._WHOLE_SAMPLES))
    assert samples.whole_sample(catalog.UP, 9) is not samples.whole_sample(catalog.UP, 9)
    assert samples.whole_sample(catalog.DUE_ACTIONS, 4, _CLAIMED) is first
