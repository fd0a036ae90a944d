"""A real Alertmanager (Debian's `prometheus-alertmanager`) that routes every alert to a
webhook receiver of the test's own."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.daemon import Daemon, installed


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
        self._daemon = Daemon(
            "alertmanager",
            installed(("prometheus-alertmanager", "alertmanager"), "prometheus-alertmanager"),
            config,
            lambda workdir, port: [
                f"--storage.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
        )
        self.port = self._daemon.port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._daemon.stop()
