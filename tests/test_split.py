"""The sites split among processes (`processes: 2`), on real databases through the real
`serve` command: one answer with every family once and every site once, as one process
answers; each process within its share of the connections; a helper that stalls has its
sites reported as down and is killed, one that dies is started again, and the exporter's
CPU counts them; a reload reaches the helpers, and another number of processes takes
effect; a stop leaves no helper behind."""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from actionscheduler_exporter.exposition.render import OPENMETRICS, PROTOBUF, TEXT
from actionscheduler_exporter.split.helpers import MOST_UNANSWERED
from testbed.mariadb import Server
from testbed.metrics_proto import decode
from testbed.ports import free_port
from testbed.processes import children
from testbed.store import ActionSchedulerStore
from tests.support.store_databases import store_databases
from tests.support.waiting import port_open, wait_until

USER_PASSWORD = "split-secret"
SUBSITES = ["wp_2_", "wp_3_", "wp_4_", "wp_5_"]
STORES = 10
# Series whose values or presence belong to one process or one moment, not to the sites.
_PROCESS_OWN = (
    "process_",
    "actionscheduler_exporter_build_info",
    "actionscheduler_exporter_config",
)


@dataclass
class Fleet:
    mariadb: Server
    databases: list[str]
    user: str

    def document(self, processes: int, connections: int = 4, extra: int = 0) -> dict[str, Any]:
        """The stores, a network of subsites in the first one's database, and a server
        that does not answer; `extra`: stores from the end of `databases` left out."""
        server = {"host": self.mariadb.host, "port": self.mariadb.port}
        login = {"user": self.user, "password": USER_PASSWORD, "query_timeout": 5.0}
        served = self.databases[: len(self.databases) - extra]
        sites: list[dict[str, Any]] = [
            {"name": name, **server, **login, "database": name} for name in served
        ]
        network = {"table_prefix": "auto", "database": self.databases[0]}
        sites.append({"name": "net", **server, **login, **network})
        unreachable = {"host": "127.0.0.1", "port": 1, "database": "nothing"}
        sites.append({"name": "unreachable", **login, **unreachable, "query_timeout": 1.0})
        return {"processes": processes, "connections_per_server": connections, "sites": sites}

    def labels(self, extra: int = 0) -> set[str]:
        served = self.databases[: len(self.databases) - extra]
        network = {f"net:{prefix}" for prefix in ["wp_", *SUBSITES]}
        return {*served, *network, "unreachable"}


@pytest.fixture
def fleet(mariadb: Server) -> Iterator[Fleet]:
    token = secrets.token_hex(3)
    names = [f"as_test_split_{token}_{index}" for index in range(STORES)]
    user = f"as_split_{token}"
    with store_databases(mariadb, names, user, USER_PASSWORD, lambda index: index % 3):
        first = mariadb.connect(names[0])
        try:
            for prefix in SUBSITES:
                store = ActionSchedulerStore(first, prefix)
                store.create_tables()
                store.create("woocommerce_deliver_webhook_async", args=[prefix])
        finally:
            first.close()
        yield Fleet(mariadb, names, user)


class Exporter:
    """The `serve` command on a free port, its log in a file."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config = config
        self.log = log
        self.port = free_port()
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "actionscheduler_exporter", "--config.file", str(config),
                 "--web.listen-address", f"127.0.0.1:{self.port}"],
                stdout=subprocess.DEVNULL, stderr=stderr,
            )  # fmt: skip
        if not wait_until(lambda: port_open(self.port), 60):
            self.stop()  # not left behind by a failed start
            raise AssertionError(f"the exporter did not listen: {self.log.read_text()}")

    def get(self, accept: str = TEXT, timeout: float | None = None) -> bytes:
        headers = {"Accept": accept, "Accept-Encoding": "gzip"}
        if timeout is not None:
            headers["X-Prometheus-Scrape-Timeout-Seconds"] = str(timeout)
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/metrics", headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            body: bytes = response.read()
            encoded = response.headers.get("Content-Encoding") == "gzip"
        return gzip.decompress(body) if encoded else body

    def up(self, timeout: float | None = None) -> dict[str, float]:
        """Each site's `actionscheduler_up`, from a text scrape (a site seen twice fails)."""
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(self.get(TEXT, timeout).decode()):
            if family.name == "actionscheduler_up":
                for item in family.samples:
                    label = item.labels["site"]
                    assert label not in found, f"{label} is exported twice"
                    found[label] = item.value
        return found

    def helpers(self) -> list[int]:
        return children(self.process.pid)

    def cpu_seconds(self) -> float:
        """The exporter's `process_cpu_seconds_total`."""
        for family in text_string_to_metric_families(self.get(TEXT).decode()):
            if family.name == "process_cpu_seconds":
                return float(family.samples[0].value)
        raise AssertionError("no process_cpu_seconds_total")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


def cpu_of(pid: int) -> float:
    """A process's user and system CPU seconds, from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rpartition(b")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def exporter(tmp_path: Path, name: str, document: dict[str, Any]) -> Iterator[Exporter]:
    config = tmp_path / f"{name}.yml"
    config.write_text(yaml.safe_dump(document))
    running = Exporter(config, tmp_path / f"{name}.log")
    try:
        yield running
    finally:
        running.stop()


@contextlib.contextmanager
def two_processes_up(fleet: Fleet, tmp_path: Path) -> Iterator[tuple[Exporter, int]]:
    """An exporter of two processes whose sites are all up (but the unreachable one),
    and its helper."""
    with exporter(tmp_path, "two", fleet.document(processes=2)) as two:
        assert wait_until(lambda: all_up_but_unreachable(two, fleet.labels()), 60)
        [helper] = two.helpers()
        yield two, helper


def all_up_but_unreachable(running: Exporter, labels: set[str]) -> bool:
    up = running.up()
    return up.keys() == labels and all(up[label] == (label != "unreachable") for label in up)


def started_again(running: Exporter, labels: set[str], helper: int) -> bool:
    """Every site up with another helper than `helper`."""
    return all_up_but_unreachable(running, labels) and running.helpers() not in ([], [helper])


def shape(body: bytes, content_type: str) -> list[tuple[Any, ...]]:
    """Each family's name, type and series (their names and labels, not their values),
    as a parser reads the answer; the process's own families left out. Every family is
    read whole: a family that came twice would be two entries."""
    families: list[tuple[Any, ...]]
    if content_type == PROTOBUF:
        families = [
            (family.name, str(family.type), sorted(
                tuple(sorted((str(pair.name), str(pair.value)) for pair in metric.label))
                for metric in family.metric
            ))
            for family in decode(body)
        ]  # fmt: skip
    else:
        parsed = (
            openmetrics_families if content_type == OPENMETRICS else text_string_to_metric_families
        )
        families = [
            (family.name, family.type, sorted(
                (item.name, tuple(sorted(item.labels.items()))) for item in family.samples
            ))
            for family in parsed(body.decode())
        ]  # fmt: skip
    return [family for family in families if not family[0].startswith(_PROCESS_OWN)]


def test_two_processes_answer_as_one_does_in_every_format(fleet: Fleet, tmp_path: Path) -> None:
    labels = fleet.labels()
    with (
        exporter(tmp_path, "one", fleet.document(processes=1)) as one,
        exporter(tmp_path, "two", fleet.document(processes=2)) as two,
    ):
        assert len(two.helpers()) == 1 and one.helpers() == []
        for running in (one, two):
            assert wait_until(partial(all_up_but_unreachable, running, labels), 60)
        # The exporter's CPU is both processes'.
        [helper] = two.helpers()
        spent = cpu_of(two.process.pid) + cpu_of(helper)
        assert two.cpu_seconds() >= spent > cpu_of(two.process.pid)
        # The landing page lists the serving process's sites and counts the helper's.
        with urllib.request.urlopen(f"http://127.0.0.1:{two.port}/", timeout=30) as page:
            landing = page.read().decode()
        listed = sum(f"<td>{label}</td>" in landing for label in labels)
        counted = re.search(r"and (\d+) more sites, read by", landing)
        assert counted is not None and 0 < listed < len(labels), landing
        assert listed + int(counted.group(1)) == len(labels)
        for content_type in (TEXT, OPENMETRICS, PROTOBUF):
            # The heavy tier's families come as each process refreshes them: the same
            # families and series once both have.
            def same(content_type: str = content_type) -> bool:
                return shape(one.get(content_type), content_type) == shape(
                    two.get(content_type), content_type
                )

            assert wait_until(same, 60), content_type
            names = [family[0] for family in shape(two.get(content_type), content_type)]
            assert len(names) == len(set(names)), content_type  # each family whole, once
        log = two.log.read_text()
        assert "reported as down" not in log and "could not be applied" not in log


def test_each_process_keeps_to_its_share_of_the_connections(fleet: Fleet, tmp_path: Path) -> None:
    """Two processes sharing two connections per server: one each, never more in all."""
    most = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal most
        with fleet.mariadb.connect() as admin, admin.cursor() as cursor:
            while not stop.is_set():
                cursor.execute(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s",
                    (fleet.user,),
                )
                row = cursor.fetchone()
                most = max(most, int(row[0]) if row else 0)
                stop.wait(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with exporter(tmp_path, "two", fleet.document(processes=2, connections=2)) as two:
            assert wait_until(lambda: all_up_but_unreachable(two, fleet.labels()), 60)
            for _ in range(5):
                two.get()
    finally:
        stop.set()
        watcher.join(10)
    assert 2 <= most <= 2  # both processes read (one connection each), no third


def test_a_stalled_helper_has_its_sites_reported_down_then_is_killed_and_started_again(
    fleet: Fleet, tmp_path: Path
) -> None:
    labels = fleet.labels()
    with two_processes_up(fleet, tmp_path) as (two, helper):
        spent = two.cpu_seconds()
        os.kill(helper, signal.SIGSTOP)
        try:
            # The helper does not answer within the scrape's time: its sites stay in the
            # answer, as down; the serving process's own are read as before.
            for _ in range(MOST_UNANSWERED):
                up = two.up(timeout=5)
                assert up.keys() == labels
                down = {label for label, value in up.items() if value == 0} - {"unreachable"}
                assert down, "the stalled helper's sites were not reported as down"
                assert all(up[label] == 1 for label in labels - down - {"unreachable"})
            log = two.log.read_text()
            assert "did not answer in time" in log
            assert "a helper process answers no scrape; killed" in log
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(helper, signal.SIGCONT)
        # Found stopped, it is started again at a scrape; every site is in every answer
        # meanwhile, down or up, and all are up again with the new helper.
        assert wait_until(lambda: started_again(two, labels, helper), 60)
        log = two.log.read_text()
        assert "a helper process stopped" in log
        assert log.count("helper process started") == 2
        # The CPU of the helper that ended stays counted: the counter does not fall.
        assert two.cpu_seconds() >= spent


def test_a_helper_that_dies_is_started_again_and_its_cpu_stays_counted(
    fleet: Fleet, tmp_path: Path
) -> None:
    labels = fleet.labels()
    with two_processes_up(fleet, tmp_path) as (two, helper):
        spent = two.cpu_seconds()
        os.kill(helper, signal.SIGKILL)
        # Every site is in every answer meanwhile (`up` checks each once), down or up.
        assert wait_until(lambda: started_again(two, labels, helper), 60)
        assert "a helper process stopped" in two.log.read_text()
        assert two.cpu_seconds() >= spent


def test_a_reload_reaches_the_helpers_and_can_change_the_processes(
    fleet: Fleet, tmp_path: Path
) -> None:
    with exporter(tmp_path, "two", fleet.document(processes=2, extra=3)) as two:
        assert wait_until(lambda: all_up_but_unreachable(two, fleet.labels(extra=3)), 60)
        [helper] = two.helpers()
        # Three stores more: each goes to one process or the other.
        two.config.write_text(yaml.safe_dump(fleet.document(processes=2)))
        two.process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: all_up_but_unreachable(two, fleet.labels()), 60)
        assert two.helpers() == [helper]  # the same helper, configured anew
        # One process: the helper is let go of, the serving one reads every site.
        two.config.write_text(yaml.safe_dump(fleet.document(processes=1)))
        two.process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: two.log.read_text().count("configuration reloaded") == 2, 30)
        assert wait_until(lambda: all_up_but_unreachable(two, fleet.labels()), 60)
        assert wait_until(lambda: two.helpers() == [], 60)
        assert "a helper process stopped" not in two.log.read_text()


def test_a_stop_leaves_no_helper_behind(fleet: Fleet, tmp_path: Path) -> None:
    with two_processes_up(fleet, tmp_path) as (two, helper):
        two.stop()
        assert two.process.returncode == 0
        assert wait_until(lambda: not Path(f"/proc/{helper}").exists(), 30)
