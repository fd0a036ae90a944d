"""Prometheus' own data model for the protobuf exposition, generated at test time from
testbed/proto/metrics.proto (its source is noted there) with grpcio-tools' protoc, and a
reader of the delimited stream the exporter writes."""

from __future__ import annotations

import functools
import importlib
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

PROTO = Path(__file__).resolve().parent / "proto" / "metrics.proto"


@functools.cache
def metrics_pb2() -> ModuleType:
    """The generated module (io.prometheus.client's messages)."""
    import grpc_tools
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="metrics-proto-")
    includes = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/timestamp.proto
    status = protoc.main(
        [
            "protoc",
            f"-I{PROTO.parent}",
            f"-I{includes}",
            f"--python_out={out}",
            str(PROTO),
        ]
    )
    assert status == 0, f"protoc failed on {PROTO}"
    sys.path.insert(0, out)
    try:
        return importlib.import_module("metrics_pb2")
    finally:
        sys.path.remove(out)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def decode(body: bytes) -> list[Any]:
    """Every MetricFamily of a delimited stream, parsed by the generated classes."""
    family_type = metrics_pb2().MetricFamily
    families = []
    at = 0
    while at < len(body):
        length, at = _varint(body, at)
        assert at + length <= len(body), "a message runs past the end of the body"
        family = family_type()
        family.ParseFromString(body[at : at + length])
        families.append(family)
        at += length
    return families


def family_names(body: bytes) -> list[str]:
    """The name of each MetricFamily of a delimited stream, read by hand (its first field,
    as the exporter writes it): without the generated module, which the dependency-range
    tiers do not install."""
    names = []
    at = 0
    while at < len(body):
        length, at = _varint(body, at)
        message = body[at : at + length]
        assert message[:1] == b"\x0a", "a family that does not start with its name"
        size, start = _varint(message, 1)
        names.append(message[start : start + size].decode())
        at += length
    return names
