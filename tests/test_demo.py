"""`make demo` on a laptop (issue 26, item 4): with no MariaDB anywhere to find (inside a
network namespace of its own, where nothing answers on 3306) it starts a private server,
serves a live queue, and on Ctrl-C stops everything it started; beside a server that
holds other databases it creates one of its own and drops only that one."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

from testbed.mariadb import Server
from testbed.ports import free_port
from tests.support.waiting import port_open, wait_until

ROOT = Path(__file__).resolve().parent.parent

# Run inside the namespace: loopback up, the demo started, one scrape, then Ctrl-C.
IN_NAMESPACE = textwrap.dedent(
    """
    import os, signal, socket, subprocess, sys, time, urllib.request
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    assert socket.socket().connect_ex(("127.0.0.1", 3306)) != 0, "a server answers on 3306"
    port = int(sys.argv[1])
    demo = subprocess.Popen([sys.executable, "-m", "testbed.demo", "--port", str(port)],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    body = ""
    while time.monotonic() < deadline and demo.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                body = r.read().decode()
            if 'actionscheduler_up{site="demo:wp_"} 1.0' in body:
                break
        except OSError:
            pass
        time.sleep(0.5)
    demo.send_signal(signal.SIGINT)
    _, stderr = demo.communicate(timeout=60)
    print("SCRAPED" if 'actionscheduler_up{site="demo:wp_"} 1.0' in body else "NOT SCRAPED")
    print(f"EXIT {demo.returncode}")
    sys.stderr.write(stderr)
    """
)


def demo_environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "AS_TEST_DSN": ""}


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
def test_the_demo_runs_where_no_mariadb_answers_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    script = tmp_path / "in_namespace.py"
    script.write_text(IN_NAMESPACE)
    done = subprocess.run(
        ["unshare", "-n", sys.executable, str(script), str(free_port())],
        cwd=tmp_path, env=demo_environment(), capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert "SCRAPED" in done.stdout and "NOT SCRAPED" not in done.stdout, done.stderr[-3000:]
    assert "EXIT 0" in done.stdout, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    # Its private server is stopped: nothing runs on its data directory.
    private = tmp_path / ".demo" / "mariadb"
    assert (private / "data" / "mysql").is_dir()  # absolute paths: made where it was run
    running = subprocess.run(["pgrep", "-f", str(private)], capture_output=True, text=True)
    assert running.stdout.strip() == ""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_demo_beside_a_server_drops_only_its_own_database(
    tmp_path: Path, mariadb: Server, stop: signal.Signals
) -> None:
    """Stopped by Ctrl-C or by SIGTERM (`timeout`, a service manager): before, uvicorn's
    SIGTERM raised again after its drain ended the demo before it dropped its database."""
    someone_elses = f"as_demo_{secrets.token_hex(3)}_keep"  # what the old demo dropped
    admin = mariadb.connect()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {someone_elses}")
    port = free_port()
    auth = mariadb.user + (f":{mariadb.password}" if mariadb.password else "")
    demo = subprocess.Popen(
        [sys.executable, "-m", "testbed.demo", "--port", str(port),
         "--dsn", f"mysql://{auth}@{mariadb.host}:{mariadb.port}"],
        cwd=tmp_path, env=demo_environment(), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert wait_until(lambda: port_open(port), 60)
        assert wait_until(lambda: "demo:wp_2_" in metrics(port), 60)
        with admin.cursor() as cursor:
            cursor.execute("SHOW DATABASES")
            during = {row[0] for row in cursor.fetchall()}
    finally:
        demo.send_signal(stop)
        _, stderr = demo.communicate(timeout=60)
    with admin.cursor() as cursor:
        cursor.execute("SHOW DATABASES")
        after = {row[0] for row in cursor.fetchall()}
        cursor.execute(f"DROP DATABASE IF EXISTS {someone_elses}")
    admin.close()
    assert demo.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    (own,) = re.findall(r"the demo's database is (as_demo_[0-9a-f]{8})", stderr)
    assert own in during and own not in after  # its own: created, then dropped
    assert someone_elses in after  # another's: untouched


def metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            return str(answer.read().decode())
    except OSError:
        return ""
