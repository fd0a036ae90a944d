"""Which part of the sites, and which share of the connections, each process has."""

from __future__ import annotations

from dataclasses import replace

from actionscheduler_exporter.config.model import ExporterConfig


def processes_of(config: ExporterConfig) -> int:
    """The processes `config` is read by: as asked, but never more than the connections
    to a server (each process needs one of its own)."""
    return min(config.processes, config.connections_per_server)


def part_config(config: ExporterConfig, index: int) -> ExporterConfig:
    """The configuration of process `index` (0: the one that serves HTTP): its part of
    this shard's sites, and its share of the connections per server, so that all the
    processes together open no more than `connections_per_server`."""
    parts = processes_of(config)
    if parts == 1:
        return config
    connections, extra = divmod(config.connections_per_server, parts)
    return replace(
        config,
        shard=config.shard.part(index, parts),
        connections_per_server=connections + (1 if index < extra else 0),
    )
