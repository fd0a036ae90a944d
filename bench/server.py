"""The benchmark's own MariaDB: its data stays in .bench/ between runs, so a store is
generated once, and its buffer pool is sized like a shop's database server."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from testbed.mariadb import Server, start_private

ROOT = Path(__file__).resolve().parent.parent
# `AS_BENCH_MARIADB=<dir>`: another data directory (a second server beside a generation).
WORKDIR = Path(os.environ.get("AS_BENCH_MARIADB", ROOT / ".bench" / "mariadb"))
# The measurements used 4 GB; 2 GB holds the 10M store's indexes on a 24 GB machine.
BUFFER_POOL = os.environ.get("AS_BENCH_BUFFER_POOL", "2G")
# The table definitions cached: the 1,000 databases, the 1,000 subsites and the stores of
# one size make 8,000 tables; the open tables are sized after start (`size_table_cache`).
# With the defaults (2,000 and 400) a thousand stores' floor is bound by opening tables,
# and slows from pass to pass as the caches churn (520 ms to 1,270 ms in ten passes).
TABLE_CACHES = ["--table-definition-cache=10000"]
# Open tables are instances: each subquery of a statement holds one of its table. The
# exporter's statements keep about 18 per store open (a scrape's hot statement 9, the
# heavy tier and the due split the rest), the floor's 8. MariaDB cuts the setting to what
# its open-files limit allows at start (9,909 with 20,000 files), though an InnoDB table
# holds no file per instance: it is raised after start (`size_table_cache`).
OPEN_TABLES_PER_STORE = 20
# `AS_BENCH_APART=1`: the server on the machine's last core, the benchmark and the
# exporters it starts on the others, as in production, where the database server is
# another host: on two cores shared, the floor alone keeps both busy, and every
# millisecond of the exporter's CPU is one the server waits for.
APART = os.environ.get("AS_BENCH_APART", "") not in ("", "0")


@contextlib.contextmanager
def bench_server() -> Iterator[Server]:
    server = start_private(
        WORKDIR,
        extra_arguments=[
            f"--innodb-buffer-pool-size={BUFFER_POOL}",
            "--local-infile=1",
            "--innodb-log-file-size=512M",
            "--max-allowed-packet=64M",
            *TABLE_CACHES,
        ],
    )
    try:
        size_table_cache(server, 2_500)  # the 2,000 small stores and the large ones
        if APART:
            _apart(server)
        yield server
    finally:
        server.stop()


def size_table_cache(server: Server, stores: int) -> None:
    """`table_open_cache` for `stores`, as docs/operations.md tells a server to have."""
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"SET GLOBAL table_open_cache = {stores * OPEN_TABLES_PER_STORE}")


def _apart(server: Server) -> None:
    """Pins every thread of the server to the last core (those it starts later inherit
    it), and this process to the others (the exporters it starts inherit it)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2 or server.process is None:
        raise SystemExit("AS_BENCH_APART needs two cores and a server the benchmark started")
    for task in Path(f"/proc/{server.process.pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), {cores[-1]})
    os.sched_setaffinity(0, set(cores[:-1]))
