"""The installed command: `check` and `serve`, run as a user would run them."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from testbed.mariadb import Server
from testbed.ports import free_port
from testbed.store import ActionSchedulerStore
from tests.support import logfmt
from tests.support.scenarios import killed_worker
from tests.support.waiting import port_open, wait_until


def command(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actionscheduler_exporter", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def dsn(server: Server, database: str, **params: str) -> str:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    auth = server.user + (f":{server.password}" if server.password else "")
    return f"mysql://{auth}@{server.host}:{server.port}/{database}?{query}"


def test_check_prints_the_queue_and_exits_0(
    store: ActionSchedulerStore, mariadb: Server, database: str
) -> None:
    killed_worker(store)
    done = command(
        "check",
        env={
            "AS_EXPORTER_DSN": dsn(mariadb, database, concurrent_batches_limit="2"),
            "AS_EXPORTER_SITE": "shop",
        },
    )
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    # Issue 26, item 7: columns named for what they count.
    assert header.split()[:4] == ["SITE", "UP", "DUE-UNCLAIMED", "DUE-CLAIMED"]
    assert header.split()[-1] == "FAILED-KEPT"
    cells = row.split()
    # site, up, due, claimed, oldest due, running, longest run, claims/limit, orphaned, stale
    assert cells[:4] == ["shop", "yes", "15", "5"]
    assert cells[4] == "15m" and cells[5] == "1" and cells[6] == "10m"
    assert cells[7] == "1/2" and cells[8] == "1" and cells[9] == "5"
    # The worst groups: the killed worker's webhooks, 20 due, the oldest 15 minutes late.
    lines = done.stdout.splitlines()
    table = lines[lines.index("") + 1 :]
    assert table[0].split() == ["SITE", "GROUP", "DUE-ALL", "OLDEST", "DUE"]
    assert table[1].split() == ["shop", "woocommerce-webhooks", "20", "15m"]


def test_check_exits_1_when_a_site_is_down_or_tables_are_missing(
    store: ActionSchedulerStore, mariadb: Server, database: str, tmp_path: Path
) -> None:
    config = tmp_path / "exporter.yml"
    config.write_text(f"""
sites:
  - name: good
    dsn: {dsn(mariadb, database)}
  - name: no-plugin
    dsn: {dsn(mariadb, database, table_prefix="wp_9_")}
  - name: unreachable
    dsn: mysql://root@127.0.0.1:1/{database}?query_timeout=1s
""")
    done = command("--config", str(config), "check", env={})
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[1].split()[:2] == ["good", "yes"]
    assert lines[2].split()[:2] == ["no-plugin", "no"]
    assert lines[3].split()[:2] == ["unreachable", "no"]
    assert "no-plugin: missing table(s) wp_9_actionscheduler_actions" in done.stdout
    assert "unreachable: (2003)" in done.stdout


def test_serve_starts_with_the_database_down_and_stops_on_sigterm() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "actionscheduler_exporter", "--listen-address", f"127.0.0.1:{port}"],
        env={**os.environ, "AS_EXPORTER_DSN": "mysql://root@127.0.0.1:1/shop?query_timeout=1s"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        body = ""
        assert wait_until(lambda: port_open(port), 20)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
        assert 'actionscheduler_up{site="shop"} 0.0' in body
        assert 'actionscheduler_exporter_errors_total{site="shop",kind="connect"} 1.0' in body
        process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        process.wait(timeout=10)
        assert time.monotonic() - started < 2
        # uvicorn shuts down gracefully, then re-raises the signal it caught.
        assert process.returncode in (0, -signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()
        _, stderr = process.communicate()
    # Every line of the process's log is logfmt, every field a key of its own.
    lines = [logfmt.parse(line) for line in stderr.splitlines() if line]
    down = [line for line in lines if line["msg"] == "site down"]
    assert [(line["site"], line["kind"]) for line in down] == [("shop", "connect")]
    assert "Finished server process" in stderr


def test_healthcheck_reads_the_listen_address_the_server_reads() -> None:
    """Issue 16: for the image's HEALTHCHECK, which cannot see the server's arguments."""
    port = free_port()
    env = {**os.environ, "AS_EXPORTER_DSN": "mysql://nobody@127.0.0.1:9/none",
           "AS_EXPORTER_LISTEN_ADDRESS": f"127.0.0.1:{port}"}  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "actionscheduler_exporter"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_until(lambda: port_open(port), 20)
        check = [sys.executable, "-m", "actionscheduler_exporter", "healthcheck"]
        assert subprocess.run(check, env=env, timeout=30).returncode == 0
        elsewhere = {**env, "AS_EXPORTER_LISTEN_ADDRESS": f"127.0.0.1:{free_port()}"}
        assert subprocess.run(check, env=elsewhere, timeout=30).returncode == 1
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)


@pytest.mark.parametrize("log_format", ["json", "logfmt"])
def test_a_hostile_database_name_forges_no_line_in_the_log_or_the_report(
    mariadb: Server, tmp_path: Path, log_format: str
) -> None:
    """`database: auto` over a database whose name holds a newline and an ANSI escape: the
    log (JSON or logfmt: every line parses, every field a key) and `check`'s report write
    the name with its control characters escaped (issue 36, item 12)."""
    token = secrets.token_hex(3)
    hostile = f"asctl_{token}_\n\x1b[31mred"
    admin = mariadb.connect()
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{hostile}`")
        store = ActionSchedulerStore(mariadb.connect(hostile), "wp_")
        store.create_tables()
        store.connection.close()
        config = tmp_path / "exporter.yml"
        config.write_text(yaml.safe_dump({"sites": [{
            "name": "net", "host": mariadb.host, "port": mariadb.port, "user": mariadb.user,
            "password": mariadb.password, "database": "auto",
            "database_pattern": f"asctl\\_{token}\\_%",
        }]}))  # fmt: skip
        done = command(
            "--log.format", log_format, "--log.level", "debug", "--config.file", str(config),
            "check", "--timeout", "8", env={},
        )  # fmt: skip
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{hostile}`")
        admin.close()
    lines = [line for line in done.stderr.splitlines() if line]
    parse = json.loads if log_format == "json" else logfmt.parse
    for line in lines:
        assert {"ts", "level", "logger", "msg"} <= parse(line).keys(), line
    assert "\x1b" not in done.stderr + done.stdout
    assert "asctl" in done.stdout and "\\n\\x1b[31mred" in done.stdout, done.stdout
    assert not [line for line in done.stdout.splitlines() if line.startswith("\x1b")]


def test_a_sigterm_as_soon_as_the_port_opens_stops_it_cleanly(tmp_path: Path) -> None:
    """The sockets listen before uvicorn installs its signal handlers: a container stopped
    as soon as its port answered swallowed the SIGTERM and was killed after its grace
    period (exit 137). The early stop is now handed to the server."""
    config = tmp_path / "exporter.yml"
    config.write_text("sites:\n  - {name: shop, host: 127.0.0.1, port: 1, user: u, database: wp}\n")
    for _ in range(3):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "actionscheduler_exporter", "--config.file", str(config),
             "--web.listen-address", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert wait_until(lambda listening=port: port_open(listening), 30)  # type: ignore[misc]
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=20) == 0
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()
