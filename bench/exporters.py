"""The two exporters under test, each run as its own process on a free loopback port."""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import time
import urllib.error
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from actionscheduler_exporter.web.deflaters import GZIP_WINDOW
from bench import generic
from bench.measure import http_get
from testbed.accept_headers import NATIVE_ACCEPT, PROMETHEUS_ACCEPT
from testbed.mariadb import Server, stop_process
from testbed.ports import free_port
from testbed.processes import children

# The heavy tier is refreshed once at start, then not again while the scrapes are timed:
# its own cost is reported apart (collector durations), not mixed into the hot scrapes.
BENCH_HEAVY_INTERVAL = "1h"
# Another checkout (`AS_BENCH_BASELINE=<path>`): its exporter measured beside this one's.
BASELINE = os.environ.get("AS_BENCH_BASELINE")
_PROTOBUF_TYPE = "application/vnd.google.protobuf"
# The most of the body read at once.
_READ_SIZE = 64 * 1024


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    port: int
    _connection: http.client.HTTPConnection | None = None

    def scrape(self) -> str:
        """GET /metrics as Prometheus does it: on a kept-alive connection, with its Accept
        and gzip, the answer decompressed as it is read."""
        return self._scrape(PROMETHEUS_ACCEPT, protobuf=False).decode()

    def scrape_protobuf(self) -> bytes:
        """GET /metrics as Prometheus does it with native histograms enabled."""
        return self._scrape(NATIVE_ACCEPT, protobuf=True)

    def _scrape(self, accept: str, *, protobuf: bool) -> bytes:
        try:
            response = self._get(accept)
        except (http.client.RemoteDisconnected, ConnectionError):
            # The server closed the idle connection (uvicorn's keep-alive is 5 s): reopen.
            self._connection = None
            response = self._get(accept)
        body = _read_body(response)
        if response.status != 200:
            raise RuntimeError(f"/metrics answered {response.status}: {body[:200]!r}")
        content_type = response.getheader("content-type", "")
        if content_type.startswith(_PROTOBUF_TYPE) != protobuf:
            raise RuntimeError(f"/metrics answered {content_type!r} to {accept!r}")
        return body

    def _get(self, accept: str) -> http.client.HTTPResponse:
        if self._connection is None:
            self._connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        headers = {"Accept": accept, "Accept-Encoding": "gzip"}
        self._connection.request("GET", "/metrics", headers=headers)
        return self._connection.getresponse()

    @property
    def pids(self) -> list[int]:
        """The exporter's process and its helper processes (`processes` above one)."""
        return [self.process.pid, *children(self.process.pid)]


@dataclass
class Shards:
    """Exporters that share the sites (`--total-shards`), each a target of its own, which
    Prometheus scrapes at the same time: scraped at once, their answers joined (each
    shard's families whole in its own answer; the benchmark's readers of values, by
    series, do not mind a family named again)."""

    shards: list[Running]
    _at_once: ThreadPoolExecutor

    def scrape(self) -> str:
        return "".join(self._at_once.map(Running.scrape, self.shards))

    def scrape_protobuf(self) -> bytes:
        return b"".join(self._at_once.map(Running.scrape_protobuf, self.shards))

    @property
    def pids(self) -> list[int]:
        return [pid for shard in self.shards for pid in shard.pids]


@contextlib.contextmanager
def sharded_exporters(
    document: dict[str, Any],
    workdir: Path,
    shards: int,
    name: str = "exporter",
    source: Path | None = None,
) -> Iterator[Shards]:
    """`shards` exporters serving `document`'s sites between them, each as one of
    `--total-shards` (and with `document`'s `connections_per_server`, if it has one)."""
    with contextlib.ExitStack() as stack:
        running = [
            stack.enter_context(
                exporter_for(
                    document,
                    workdir,
                    f"--shard={index}",
                    f"--total-shards={shards}",
                    name=f"{name}-shard-{index}",
                    source=source,
                )
            )
            for index in range(shards)
        ]
        at_once = stack.enter_context(ThreadPoolExecutor(shards, thread_name_prefix=name))
        yield Shards(running, at_once)


def _read_body(response: http.client.HTTPResponse) -> bytes:
    """The answer's body, decompressed as its pieces come: Prometheus' scraper reads a
    gzip answer through a gzip reader over the body (`io.Copy` from it), so that the
    decompression of a large answer's first pieces runs while the rest is on its way.
    Read whole and then decompressed, a thousand stores' answer took 16 ms more after
    its last byte (docs/performance.md)."""
    if response.getheader("content-encoding") != "gzip":
        return response.read()
    decompressor = zlib.decompressobj(GZIP_WINDOW)
    pieces = []
    while piece := response.read1(_READ_SIZE):
        pieces.append(decompressor.decompress(piece))
    # The end of the answer: read1 leaves an answer of a given length unfinished (the
    # connection not ready for the next request); read finishes it.
    pieces.append(decompressor.decompress(response.read()))
    pieces.append(decompressor.flush())
    if not decompressor.eof or decompressor.unused_data:
        raise RuntimeError("/metrics answered a gzip body that is not one whole gzip member")
    return b"".join(pieces)


def bench_site(server: Server, database: str, **settings: object) -> dict[str, object]:
    """The configuration of a bench site on `server`, with `settings` over the defaults."""
    return {
        "name": "bench",
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "password": server.password,
        "database": database,
        "heavy_query_timeout": "10m",
        **settings,
    }


@contextlib.contextmanager
def our_exporter(
    server: Server, database: str, workdir: Path, source: Path | None = None
) -> Iterator[Running]:
    """This checkout's exporter on one store, or another checkout's (`source`)."""
    # Every scrape splits the due backlog, as the raw hot SQL it is compared with does
    # (by default a site's split is re-read every 30 s: docs/performance.md).
    site = bench_site(server, database, heavy_interval=BENCH_HEAVY_INTERVAL, due_split_interval=0)
    name = "exporter" if source is None else "baseline"
    with exporter_for({"sites": [site]}, workdir, name=name, source=source) as running:
        yield running


@contextlib.contextmanager
def exporter_for(
    document: dict[str, Any],
    workdir: Path,
    *arguments: str,
    name: str = "exporter",
    source: Path | None = None,
) -> Iterator[Running]:
    """Our exporter as a process, serving the given configuration file's content; from
    another checkout when `source` is given (a baseline measured side by side with this
    one: same machine, same run; checkouts before the rename call the package `exporter`)."""
    config = workdir / f"{name}.yml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    port = free_port()
    command = [
        sys.executable,
        "-m",
        _package_in(source),
        "serve",
        "--config",
        str(config),
        "--listen-address",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
        *arguments,
    ]
    with _running(command, port, "/healthz", cwd=source) as running:
        yield running


def _package_in(source: Path | None) -> str:
    if source is not None and (source / "exporter" / "__main__.py").exists():
        return "exporter"
    return "actionscheduler_exporter"


@contextlib.contextmanager
def generic_exporter(server: Server, database: str, workdir: Path) -> Iterator[Running]:
    command = generic.install(workdir.parent / "query-exporter")
    config = workdir / "query-exporter.yml"
    generic.write_config(config, server.host, server.port, server.user, database)
    port = free_port()
    with _running(generic.command_line(command, config, port), port, "/") as running:
        yield running


@contextlib.contextmanager
def _running(
    command: list[str], port: int, ready_path: str, cwd: Path | None = None
) -> Iterator[Running]:
    # `python -m` imports from the working directory first: another checkout's exporter.
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    running = Running(process, port)
    try:
        _wait_ready(running, ready_path)
        yield running
    finally:
        stop_process(process, timeout=10)


def _wait_ready(running: Running, path: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            errors = running.process.stderr.read().decode() if running.process.stderr else ""
            raise RuntimeError(f"the exporter exited: {errors[-2000:]}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            http_get(f"http://127.0.0.1:{running.port}{path}", timeout=2)
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing answered on port {running.port} within 60 s")
