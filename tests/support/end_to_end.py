"""A real queue watched end to end: stores written as Action Scheduler writes them, the
exporter over HTTP, and a real Prometheus with Alertmanager (time-scaled rules)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from actionscheduler_exporter.config import SiteConfig
from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore
from tests.support.alerting_stack import MAIN_RULES, alerting_stack
from tests.support.alertmanager import WebhookReceiver
from tests.support.http_server import RunningExporter
from tests.support.prometheus import Prometheus


@dataclass(frozen=True)
class EndToEnd:
    mariadb: Server
    database: str
    store: Callable[[str], ActionSchedulerStore]  # a store of the given table prefix
    site: Callable[..., SiteConfig]  # a site of the test's database
    exporter: Callable[..., RunningExporter]  # the exporter over HTTP, for these sites
    workdir: Path

    def alerting(
        self, exporter: RunningExporter, rule_files: tuple[Path, ...] = (MAIN_RULES,)
    ) -> AbstractContextManager[tuple[WebhookReceiver, Prometheus]]:
        """Prometheus scraping `exporter` with the time-scaled `rule_files`, its alerts
        sent through Alertmanager to a receiver."""
        return alerting_stack(exporter, self.workdir, rule_files)
