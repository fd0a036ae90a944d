"""Sharding: every site on exactly one shard, the shard from the command line or a pod name."""

from __future__ import annotations

import pytest

from actionscheduler_exporter.config.model import ExporterConfig, SiteConfig
from actionscheduler_exporter.sharding import ALL_SITES, Shard, parse_shard
from actionscheduler_exporter.split.helpers import configured_sites
from actionscheduler_exporter.split.parts import part_config, processes_of

LABELS = [f"store-{index}" for index in range(1000)] + [f"net:wp_{i}_" for i in range(500)]


@pytest.mark.parametrize("total", [1, 2, 3, 5, 8])
def test_every_site_is_owned_by_exactly_one_shard(total: int) -> None:
    shards = [Shard(index, total) for index in range(total)]
    for label in LABELS:
        assert sum(shard.owns(label) for shard in shards) == 1, label
    # Spread evenly enough that no replica takes a multiple of its share.
    for shard in shards:
        owned = sum(shard.owns(label) for label in LABELS)
        assert owned <= 1.3 * len(LABELS) / total


@pytest.mark.parametrize(
    ("label", "total", "owner"),
    [("shop", 4, 1), ("net:wp_2_", 3, 1), ("wordpress", 2, 1), ("store-17", 5, 4)],
)
def test_the_hash_is_stable_across_processes_and_releases(
    label: str, total: int, owner: int
) -> None:
    """Changing the hash would move every site at an upgrade: these owners are pinned."""
    assert [index for index in range(total) if Shard(index, total).owns(label)] == [owner]


@pytest.mark.parametrize(
    ("value", "total", "environ", "expected"),
    [
        (None, 1, {}, ALL_SITES),
        ("2", 3, {}, Shard(2, 3)),
        ("from-pod-name", 4, {"POD_NAME": "as-exporter-3"}, Shard(3, 4)),
        ("from-pod-name", 2, {"POD_NAME": "release-name-as-exporter-0"}, Shard(0, 2)),
    ],
)
def test_the_shard_comes_from_the_command_line_or_the_pod_name(
    value: str | None, total: int, environ: dict[str, str], expected: Shard
) -> None:
    assert parse_shard(value, total, environ) == expected


@pytest.mark.parametrize(
    ("value", "total", "environ", "problem"),
    [
        (None, 3, {}, "needs --shard"),
        ("3", 3, {}, "does not exist"),
        ("0", 0, {}, "does not exist"),
        ("first", 2, {}, "a number or from-pod-name"),
        ("from-pod-name", 2, {}, "must end in the pod's ordinal"),
        ("from-pod-name", 2, {"POD_NAME": "exporter-7"}, "does not exist"),
    ],
)
def test_a_wrong_shard_is_a_clear_error(
    value: str | None, total: int, environ: dict[str, str], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_shard(value, total, environ)


@pytest.mark.parametrize(("total", "parts"), [(1, 2), (1, 3), (2, 2), (3, 4)])
def test_the_parts_of_a_shard_hold_each_of_its_sites_once(total: int, parts: int) -> None:
    """`processes`: a shard's sites split among its processes, each site in exactly
    one process of exactly one shard, and none of another shard's."""
    for index in range(total):
        shard = Shard(index, total)
        split = [shard.part(part, parts) for part in range(parts)]
        for label in LABELS:
            assert sum(part.owns(label) for part in split) == shard.owns(label), label
        for part in split:
            owned = sum(part.owns(label) for label in LABELS)
            assert owned <= 1.3 * len(LABELS) / (total * parts)
    with pytest.raises(ValueError, match="part 2 does not exist among 2"):
        ALL_SITES.part(2, 2)


@pytest.mark.parametrize(
    ("processes", "connections", "shares"),
    [(1, 4, [4]), (2, 4, [2, 2]), (2, 5, [3, 2]), (3, 4, [2, 1, 1]), (4, 2, [1, 1])],
)
def test_the_processes_share_the_connections_per_server(
    processes: int, connections: int, shares: list[int]
) -> None:
    """Every process needs a connection of its own: never more processes than
    connections, and never more connections in all than `connections_per_server`."""
    config = ExporterConfig(sites=(), processes=processes, connections_per_server=connections)
    assert processes_of(config) == len(shares)
    parts = [part_config(config, index) for index in range(len(shares))]
    assert [part.connections_per_server for part in parts] == shares
    assert len({part.shard for part in parts}) == len(shares)


def test_a_helpers_sites_before_its_first_answer_are_those_its_part_names() -> None:
    """Reported as down if it does not answer at first: the sites its part holds of
    those configured by name (what a network or a server is found to hold comes with
    its answers)."""
    named = [SiteConfig(name=f"store-{index}", database=f"db{index}") for index in range(40)]
    found = [
        SiteConfig(name="net", database="x", table_prefix="auto"),
        SiteConfig(name="all", database="auto"),
    ]
    config = ExporterConfig(sites=(*named, *found), processes=2)
    parts = [configured_sites(part_config(config, index)) for index in range(2)]
    assert sorted(label for part in parts for label, _ in part) == sorted(s.name for s in named)
    assert all(parts)
