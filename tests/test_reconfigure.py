"""A reload keeps what an unchanged site has counted: its log cursor and counters, its
heavy totals; a changed site starts again on its own, and the others are untouched."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.scrape.coordinator import Coordinator
from testbed.ports import free_port
from testbed.store import ActionSchedulerStore
from tests.support.waiting import port_open, wait_until

COMPLETED = "actionscheduler_actions_completed"


def completions(store: ActionSchedulerStore, count: int) -> None:
    for _ in range(count):
        action = store.create("woocommerce_deliver_webhook_async", group="webhooks")
        store.start(action)
        store.complete(action)


def completed(coordinator: Coordinator) -> dict[str, float]:
    return {
        result.label: sum(
            s.value for s in result.samples if s.metric.name == COMPLETED and not s.suffix
        )
        for result in coordinator.scrape(10)
    }


def test_a_reload_with_the_same_configuration_loses_no_event(
    store_factory: Callable[[str], ActionSchedulerStore], site: Callable[..., SiteConfig]
) -> None:
    one, two = store_factory("wp_"), store_factory("wp_2_")
    config = ExporterConfig(sites=(site(name="one"), site(name="two", table_prefix="wp_2_")))
    coordinator = Coordinator(config)
    try:
        completed(coordinator)  # places the cursors
        completions(one, 3)
        completions(two, 3)
        assert completed(coordinator) == {"one": 3, "two": 3}
        completions(one, 5)
        completions(two, 5)
        # The same file read again (a SIGHUP with nothing changed): a configuration equal
        # to the running one, built anew.
        assert coordinator.reconfigure(dataclasses.replace(config))
        assert completed(coordinator) == {"one": 8, "two": 8}

        # `two` changes: it starts again (its cursor at the newest row), `one` goes on.
        changed = ExporterConfig(
            sites=(site(name="one"), site(name="two", table_prefix="wp_2_", query_timeout=4.0))
        )
        completions(one, 2)
        assert coordinator.reconfigure(changed)
        after = completed(coordinator)
        assert after["one"] == 10
        assert after["two"] == 0
        completions(two, 1)
        assert completed(coordinator)["two"] == 1
        # A removed site is no longer served.
        assert coordinator.reconfigure(ExporterConfig(sites=(site(name="one"),)))
        assert list(completed(coordinator)) == ["one"]
    finally:
        coordinator.close()


def test_another_connection_budget_needs_a_new_coordinator(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    config = ExporterConfig(sites=(site(),))
    coordinator = Coordinator(config)
    try:
        assert not coordinator.reconfigure(dataclasses.replace(config, connections_per_server=2))
        assert coordinator.config is config
    finally:
        coordinator.close()


def test_a_sighup_with_the_file_unchanged_counts_every_event(
    tmp_path: Path, store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    """Scrape, 5 completions, SIGHUP with the file unchanged, scrape: the counter went
    from 3 to no series at all and the 5 events were never counted (issue 36, item 4)."""
    shop = site()
    config = tmp_path / "exporter.yml"
    config.write_text(
        yaml.safe_dump({"sites": [{
            "name": "shop", "host": shop.host, "port": shop.port, "user": shop.user,
            "password": shop.password, "database": shop.database,
        }]})
    )  # fmt: skip
    port = free_port()
    log = tmp_path / "exporter.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "actionscheduler_exporter", "--config.file", str(config),
             "--web.listen-address", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=stderr, text=True,
        )  # fmt: skip
    try:
        assert wait_until(lambda: port_open(port), 30)
        scrape_completed(port)  # places the cursor
        completions(store, 3)
        assert scrape_completed(port) == 3
        completions(store, 5)
        process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "configuration reloaded" in log.read_text(), 30)
        assert scrape_completed(port) == 8
    finally:
        process.terminate()
        process.wait(30)


def scrape_completed(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(f"{COMPLETED}_total{{")
    )
