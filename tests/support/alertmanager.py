"""A real Alertmanager (Debian's `prometheus-alertmanager`) that routes every alert to a
webhook receiver of the test's own."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.mariadb import stop_process, wait_until_ready
from testbed.ports import free_port


class WebhookReceiver:
    """Collects every alert Alertmanager posts."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver._lock:
                    receiver.alerts.extend(body["alerts"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.alerts)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Alertmanager:
    def __init__(self, webhook_url: str) -> None:
        binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        if binary is None:
            pytest.fail(
                "Alertmanager is not installed: `make test` installs Debian's "
                "prometheus-alertmanager package; run it, or apt-get install it"
            )
        self._workdir = tempfile.TemporaryDirectory(prefix="as-test-alertmanager-")
        workdir = Path(self._workdir.name)
        config = {
            "route": {
                "receiver": "test",
                "group_by": ["alertname", "site", "hook"],
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [
                {"name": "test", "webhook_configs": [{"url": webhook_url, "send_resolved": False}]}
            ],
        }
        (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self._log = (workdir / "alertmanager.log").open("w")
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'alertmanager.yml'}",
                f"--storage.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until_ready(f"http://127.0.0.1:{self.port}/-/ready", "alertmanager")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self._process)
        self._log.close()
        self._workdir.cleanup()
