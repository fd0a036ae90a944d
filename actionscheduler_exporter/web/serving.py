"""What the app serves with, and the holder a reload (SIGHUP) replaces it in."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.catalog import MetricDef
from actionscheduler_exporter.metrics.samples import Labels
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.split.helpers import NO_HELPERS, Helpers
from actionscheduler_exporter.web.auth import BasicAuth
from actionscheduler_exporter.web.webconfig import WebConfig


@dataclass(frozen=True)
class ServedWith:
    """What the app serves with: replaced as a whole when the configuration is reloaded
    (SIGHUP), and taken once at the start of each request."""

    coordinator: Coordinator
    auth: BasicAuth
    headers: list[tuple[bytes, bytes]]
    helpers: Helpers = NO_HELPERS  # those that read the other parts of the sites

    @classmethod
    def of(
        cls, coordinator: Coordinator, web: WebConfig, helpers: Helpers = NO_HELPERS
    ) -> ServedWith:
        headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in web.headers.items()
        ]
        return cls(coordinator, BasicAuth(web.users), headers, helpers)


class ReloadStatus:
    """Whether the last reload applied, and when one last did (the start counts as one),
    as Prometheus and Alertmanager report it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._successful = True
        self._success_at = time.time()

    def succeeded(self) -> None:
        with self._lock:
            self._successful, self._success_at = True, time.time()

    def failed(self) -> None:
        with self._lock:
            self._successful = False

    def samples(self) -> list[tuple[MetricDef, Labels, float]]:
        with self._lock:
            return [
                (catalog.CONFIG_LAST_RELOAD_SUCCESSFUL, (), float(self._successful)),
                (catalog.CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP, (), self._success_at),
            ]


class CurrentServing:
    """The current `ServedWith`, shared by the app and its middleware, and how the last
    reload went."""

    def __init__(self, serving: ServedWith) -> None:
        self.current = serving
        self.reloads = ReloadStatus()
