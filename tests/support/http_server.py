"""The real exporter app served by uvicorn on a free loopback port, for HTTP tests."""

from __future__ import annotations

import threading
import urllib.request

import uvicorn

from actionscheduler_exporter.config import ExporterConfig
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.web.app import create_app
from testbed.ports import free_port
from tests.support.waiting import wait_until


class RunningExporter:
    def __init__(self, config: ExporterConfig) -> None:
        self.coordinator = Coordinator(config)
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                create_app(self.coordinator),
                host="127.0.0.1",
                port=self.port,
                log_config=None,
                access_log=False,
                lifespan="off",
            )
        )
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()
        if not wait_until(lambda: self.server.started, 10, interval=0.02):
            raise RuntimeError("the exporter's HTTP server did not start")

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
        """Status, content type and body of a GET; error statuses are returned, not raised."""
        request = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return (response.status, response.headers["Content-Type"], response.read().decode())
        except urllib.error.HTTPError as error:
            return error.code, error.headers["Content-Type"], error.read().decode()

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self.coordinator.close()
