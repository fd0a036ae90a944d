"""Soak: thousands of scrapes of a moving queue keep the exporter's memory flat and its
database connection count constant. `make test` runs a shortened soak; the full one is

    AS_SOAK_SCRAPES=20000 .venv/bin/pytest tests/test_soak.py -s

(docs/operations.md has its numbers)."""

from __future__ import annotations

import http.client
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from testbed.mariadb import Server
from testbed.ports import free_port
from testbed.store import ActionSchedulerStore
from tests.support.waiting import port_open, wait_until

SCRAPES = int(os.environ.get("AS_SOAK_SCRAPES", "2000"))
# Until the bounded structures (counters per hook and group, histograms) have all their
# series: the soak then measures growth, not filling.
WARM_UP = 1000
USER = f"as_soak_{secrets.token_hex(3)}"  # another test run may share the server


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError("VmRSS")


@pytest.mark.slow
def test_memory_stays_flat_and_connections_constant(
    store: ActionSchedulerStore, mariadb: Server, database: str, connect: Callable[[], object]
) -> None:
    admin = mariadb.connect()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE USER '{USER}'@'%' IDENTIFIED BY 'soak-pw'")
        cursor.execute(f"GRANT SELECT ON {database}.* TO '{USER}'@'%'")

    def exporter_connections() -> int:
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (USER,)
            )
            return int(cursor.fetchone()[0])

    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actionscheduler_exporter",
            "--listen-address",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        env={
            **os.environ,
            "AS_EXPORTER_DSN": f"mysql://{USER}:soak-pw@{mariadb.host}:{mariadb.port}/{database}",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()

    def move_queue() -> None:
        writer = ActionSchedulerStore(mariadb.connect(database))
        count = 0
        while not stop.is_set():
            count += 1
            for index in range(5):
                writer.create(f"hook_{count % 12}", group=f"group_{count % 4}", args=[index])
            writer.run_batch(5, lambda hook: "boom" if hook.endswith("3") else None)
            if count % 20 == 0:
                writer.purge(retention=30)  # keep the tables from growing without end
            stop.wait(0.05)
        writer.connection.close()

    writer = threading.Thread(target=move_queue)
    try:
        assert wait_until(lambda: port_open(port), 20), process.stderr
        writer.start()
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def scrape() -> None:
            client.request("GET", "/metrics")
            response = client.getresponse()
            body = response.read()
            assert response.status == 200 and b"actionscheduler_up" in body

        for _ in range(WARM_UP):
            scrape()
        warm_rss, warm_connections = rss_kib(process.pid), exporter_connections()
        started = time.monotonic()
        for _ in range(SCRAPES):
            scrape()
        elapsed = time.monotonic() - started
        end_rss, end_connections = rss_kib(process.pid), exporter_connections()
        client.close()
    finally:
        stop.set()
        if writer.is_alive():
            writer.join()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
        with admin.cursor() as cursor:
            cursor.execute(f"DROP USER '{USER}'@'%'")
        admin.close()
    print(
        f"soak: {SCRAPES} scrapes in {elapsed:.1f}s ({SCRAPES / elapsed:.0f}/s), "
        f"RSS {warm_rss} KiB after warm-up, {end_rss} KiB at the end "
        f"({(end_rss - warm_rss) / 1024:+.2f} MiB), connections {warm_connections} -> "
        f"{end_connections}"
    )
    assert end_rss - warm_rss < 5 * 1024
    # One for the scrapes and one kept by the pool for the heavy tier's refreshes (its
    # statements have their own timeout), never more.
    assert warm_connections == end_connections == 2
