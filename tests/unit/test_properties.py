"""Property-based tests (hypothesis): any name a database can hold becomes valid exposition,
and any configuration file gets either a configuration or a ConfigError, never a crash."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from actionscheduler_exporter.config import ConfigError, load_file
from actionscheduler_exporter.db.schema import label_value
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import sample
from actionscheduler_exporter.rounds.result import SiteResult

SITE_KEYS = [
    "name",
    "dsn",
    "host",
    "port",
    "user",
    "password",
    "password_file",
    "database",
    "table_prefix",
    "tls",
    "labels",
    "concurrent_batches_limit",
    "query_timeout",
    "timeout_period",
    "top_hooks",
    "top_groups",
    "alerts",
    "workers",
    "kubernetes",
    "unix_socket",
    "log_rows_per_scrape",
    "log_gap_grace",
    "surprise",
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-10, 10**6)
    | st.text(max_size=30)
    | st.floats(allow_nan=False, allow_infinity=False)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    names=st.lists(
        st.text(max_size=191) | st.binary(max_size=191),
        min_size=1,
        max_size=5,
        unique_by=label_value,
    )
)
@settings(max_examples=200, deadline=None)
def test_any_hook_name_renders_as_valid_exposition(names: list[str | bytes]) -> None:
    labels = [label_value(name) for name in names]
    result = SiteResult(
        "shop",
        (),
        up=True,
        samples=[
            sample(catalog.FAILED_BY_HOOK, index, hook=text) for index, text in enumerate(labels)
        ],
    )
    body, _ = render([result], None)
    parsed = {
        s.labels["hook"]: s.value
        for family in text_string_to_metric_families(body.decode())
        if family.name == catalog.FAILED_BY_HOOK.name
        for s in family.samples
    }
    assert parsed == {text: float(index) for index, text in enumerate(labels)}


@given(st.text(alphabet=st.characters(categories=["Cs"]) | st.characters(), max_size=50))
def test_label_values_are_always_encodable(text: str) -> None:
    """Lone surrogates included: they cannot be written as UTF-8 and must not fail a scrape."""
    assert isinstance(label_value(text).encode("utf-8"), bytes)
    raw = text.encode("utf-8", "surrogatepass")
    assert isinstance(label_value(raw).encode("utf-8"), bytes)


@given(
    document=st.one_of(
        values,
        st.fixed_dictionaries(
            {
                "sites": st.lists(
                    st.dictionaries(st.sampled_from(SITE_KEYS), values, max_size=6), max_size=3
                )
            },
            optional={
                "defaults": st.dictionaries(st.sampled_from(SITE_KEYS), values, max_size=4),
                "listen_address": values,
            },
        ),
    )
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_configuration_file_loads_or_names_its_problem(document: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "exporter.yml"
        path.write_text(yaml.safe_dump(document))
        problem: ConfigError | None = None
        try:
            config = load_file(str(path))
        except ConfigError as error:
            problem = error
        if problem is not None:
            assert str(problem).startswith(str(path))
            assert problem.problem
        else:
            assert config.sites
            assert all(site.name and site.database for site in config.sites)


def test_label_texts_are_shared_up_to_a_bound() -> None:
    """Equal texts from different rows are one object (a thousand sites name the same
    hooks), but hostile data cannot grow the shared set past its bound."""
    from actionscheduler_exporter.db import schema as context

    first, second = (
        label_value(b"woocommerce_deliver_webhook_async"),
        label_value("woocommerce_deliver_webhook_async"),
    )
    assert first is second
    for index in range(context.MAX_SHARED_TEXTS + 10):
        label_value(f"hostile_hook_{index}")
    assert len(context._SHARED_TEXTS) == context.MAX_SHARED_TEXTS
    assert label_value("one more hook") == "one more hook"
