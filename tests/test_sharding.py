"""Sharded exporters on real databases: every site, and every subsite of a network, is
served by exactly one shard, for several shard counts and across a change of the count;
a site that is down is reported once; the command line takes the shard from a pod name."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.sharding import Shard
from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore

CHECK = [sys.executable, "-m", "actionscheduler_exporter", "--config"]
STORES = [f"store-{index}" for index in range(12)]
SUBSITES = ["wp_", *(f"wp_{index}_" for index in range(2, 10))]


@pytest.fixture
def network(store_factory: Callable[[str], ActionSchedulerStore]) -> list[str]:
    """A multisite network's tables: one set per subsite (the plain stores read wp_)."""
    for prefix in SUBSITES:
        store = store_factory(prefix)
        store.create("woocommerce_deliver_webhook_async", args=[prefix])
    return [f"net:{prefix}" for prefix in SUBSITES]


def sites(site: Callable[..., SiteConfig]) -> tuple[SiteConfig, ...]:
    plain = [site(name=name) for name in STORES]
    down = site(name="unreachable", host="127.0.0.1", port=1, query_timeout=1.0)
    return (*plain, site(name="net", table_prefix="auto"), down)


def served(config: tuple[SiteConfig, ...], shard: Shard) -> list[tuple[str, float]]:
    coordinator = Coordinator(ExporterConfig(sites=config, shard=shard))
    try:
        results = coordinator.scrape(10.0)
    finally:
        coordinator.close()
    return [(result.label, result.value(catalog.UP.name) or 0.0) for result in results]


@pytest.mark.parametrize("total", [1, 2, 3, 5])
def test_every_site_is_served_by_exactly_one_shard(
    network: list[str], site: Callable[..., SiteConfig], total: int
) -> None:
    config = sites(site)
    everything = {*STORES, *network, "unreachable"}
    seen: list[str] = []
    for index in range(total):
        found = served(config, Shard(index, total))
        seen += [label for label, _ in found]
        for label, up in found:
            assert up == (0.0 if label == "unreachable" else 1.0), label
    assert sorted(seen) == sorted(everything)  # each once: no duplicate series, no gap


def test_a_change_of_the_shard_count_moves_sites_without_losing_any(
    network: list[str], site: Callable[..., SiteConfig]
) -> None:
    config = sites(site)
    before = {label: i for i in range(2) for label, _ in served(config, Shard(i, 2))}
    after = {label: i for i in range(3) for label, _ in served(config, Shard(i, 3))}
    assert before.keys() == after.keys() == {*STORES, *network, "unreachable"}


def test_the_command_line_takes_the_shard_from_the_pod_name(
    network: list[str], mariadb: Server, database: str, tmp_path: Path
) -> None:
    config = tmp_path / "exporter.yml"
    auth = mariadb.user + (f":{mariadb.password}" if mariadb.password else "")
    dsn = f"mysql://{auth}@{mariadb.host}:{mariadb.port}/{database}"
    config.write_text(
        "sites:\n"
        + "".join(f"  - {{name: {name}, dsn: '{dsn}'}}\n" for name in STORES)
        + f"  - {{name: net, dsn: '{dsn}?table_prefix=auto'}}\n"
    )
    printed: list[str] = []
    for ordinal in range(3):
        done = subprocess.run(
            [*CHECK, str(config), "check", "--total-shards", "3", "--shard", "from-pod-name"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"POD_NAME": f"shop-as-exporter-{ordinal}", "PATH": ""},
        )
        assert done.returncode == 0, done.stderr
        sites_table = done.stdout.split("\n\n")[0]  # the worst groups' table follows
        printed += [line.split()[0] for line in sites_table.splitlines()[1:] if line.strip()]
    assert sorted(printed) == sorted([*STORES, *network])

    wrong = subprocess.run(
        [*CHECK, str(config), "check", "--shard", "3", "--total-shards", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode == 2
    assert "--shard: shard 3 does not exist among 3" in wrong.stderr
