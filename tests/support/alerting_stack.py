"""A real Prometheus with the shipped rules shortened in time (testbed.rules), scraping an
exporter and alerting through a real Alertmanager to a webhook receiver of the test's own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import yaml

from testbed.rules import render
from tests.support.alertmanager import Alertmanager, WebhookReceiver
from tests.support.http_server import RunningExporter
from tests.support.prometheus import Prometheus

ROOT = Path(__file__).resolve().parents[2]
TIME_SCALE = 1 / 60  # fifteen minutes become fifteen seconds
MAIN_RULES = ROOT / "rules" / "actionscheduler.rules.yml"


@contextlib.contextmanager
def alerting_stack(
    exporter: RunningExporter, tmp_path: Path, rule_files: tuple[Path, ...] = (MAIN_RULES,)
) -> Iterator[tuple[WebhookReceiver, Prometheus]]:
    shortened = []
    for path in rule_files:
        copy = tmp_path / path.name
        copy.write_text(yaml.safe_dump(render(yaml.safe_load(path.read_text()), TIME_SCALE)))
        shortened.append(copy)
    receiver = WebhookReceiver()
    alertmanager = Alertmanager(receiver.url)
    prometheus = Prometheus(
        [f"127.0.0.1:{exporter.port}"],
        rule_files=shortened,
        alertmanagers=[alertmanager.address],
    )
    try:
        yield receiver, prometheus
    finally:
        prometheus.stop()
        alertmanager.stop()
        receiver.stop()
