"""The `classic_histograms` site key: read from the file, the defaults and the DSN, refused
when it is not a boolean, and followed by the log events collector's histograms."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionscheduler_exporter.collectors.log_events.collector import LogEventsStream
from actionscheduler_exporter.config import ConfigError, load_file
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.metrics.native import HistogramCount
from tests.support.clock import FakeClock


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "exporter.yml"
    path.write_text(text)
    return str(path)


def test_classic_histograms_is_on_unless_a_site_or_the_defaults_turn_it_off(
    tmp_path: Path,
) -> None:
    config = load_file(
        write(
            tmp_path,
            "defaults: {classic_histograms: false}\n"
            "sites:\n"
            "  - {name: shop, database: x, user: u}\n"
            "  - {name: blog, database: y, user: u, classic_histograms: true}\n"
            "  - {name: dsn, dsn: 'mysql://u@db/z?classic_histograms=true'}\n",
        )
    )
    assert [site.classic_histograms for site in config.sites] == [False, True, True]
    assert SiteConfig(name="plain").classic_histograms is True


def test_classic_histograms_must_be_a_boolean(tmp_path: Path) -> None:
    path = write(tmp_path, "sites:\n  - {database: x, user: u, classic_histograms: both}")
    with pytest.raises(ConfigError) as raised:
        load_file(path)
    assert raised.value.key.endswith("classic_histograms")


@pytest.mark.parametrize("classic", [True, False])
def test_the_log_streams_histograms_follow_the_setting(classic: bool) -> None:
    stream = LogEventsStream(SiteConfig(name="shop", classic_histograms=classic), FakeClock())
    for histogram in (stream._start_delay, stream._run_duration):
        histogram.observe((("group", "g"),), 3)
        (counted,) = [s for s in histogram.samples() if isinstance(s, HistogramCount)]
        assert counted.native is not None
        assert (counted.native.classic is not None) is classic
    stream._start_delay_by_hook.observe((("hook", "h"),), 3)
    (by_hook,) = stream._start_delay_by_hook.samples()  # native only: no classic samples
    assert isinstance(by_hook, HistogramCount) and by_hook.native is not None
    assert by_hook.native.classic is None and by_hook.native.positive == ((13, 1),)
