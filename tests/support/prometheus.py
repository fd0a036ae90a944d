"""A real Prometheus server (Debian's `prometheus`) scraping test targets on loopback."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.daemon import Daemon, installed
from tests.support.waiting import wait_until


class Prometheus:
    def __init__(
        self,
        targets: list[str],
        scrape_interval: str = "1s",
        rule_files: list[Path] | None = None,
        alertmanagers: list[str] | None = None,
        scrape_configs: list[dict[str, Any]] | None = None,
        flags: tuple[str, ...] = (),
    ) -> None:
        """Scrapes `targets` as one static job, or `scrape_configs` as given; `flags` are
        added to the command line (`--enable-feature=native-histograms`)."""
        config: dict[str, Any] = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": "1s"},
            "scrape_configs": scrape_configs
            or [{"job_name": "actionscheduler", "static_configs": [{"targets": targets}]}],
            "rule_files": [str(path) for path in rule_files or []],
        }
        if alertmanagers:
            config["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": alertmanagers}]}]
            }
        self._daemon = Daemon(
            "prometheus",
            installed(("prometheus",), "prometheus"),
            config,
            lambda workdir, port: [
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                # Series go stale within seconds, not five minutes: tests run in seconds.
                "--query.lookback-delta=5s",
                *flags,
            ],
        )
        self.port = self._daemon.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expression: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expression}
        if at is not None:
            params["time"] = f"{at:.3f}"
        result: list[dict[str, Any]] = self.api("query", **params)["result"]
        return result

    def wait_for(self, expression: str, timeout: float = 30) -> list[dict[str, Any]]:
        """The query's result once it is not empty."""
        result: list[dict[str, Any]] = []

        def answered() -> bool:
            nonlocal result
            result = self.query(expression)
            return bool(result)

        if not wait_until(answered, timeout, interval=0.5):
            raise AssertionError(f"no data for {expression} within {timeout}s")
        return result

    def stop(self) -> None:
        self._daemon.stop()


def promtool() -> str:
    """The path of promtool, which `make test` installs (Debian's prometheus package)."""
    return installed(("promtool",), "prometheus")


def promtool_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)


# The shipped promtool unit tests of the rules.
RULE_TESTS = sorted((Path(__file__).resolve().parents[2] / "rules" / "tests").glob("*.test.yml"))
