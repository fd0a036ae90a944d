"""The chart's must-use plugin, run by a real PHP against a minimal WordPress hook API."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.helm_chart import ALL_ON, CHART, find, render

PLUGIN = CHART / "files" / "worker" / "action-scheduler-workers.php"

# Just enough of WordPress' hook API, and of Action Scheduler's runner, to load the plugin
# and ask what it changed.
HARNESS = Path(__file__).resolve().parent / "php" / "harness.php"


def run_plugin(batches: str | None) -> str:
    php = shutil.which("php")
    if php is None:
        pytest.fail("php is not installed: `make test` installs Debian's php-cli")
    env = {"PATH": os.environ["PATH"]}
    if batches is not None:
        env["AS_CONCURRENT_BATCHES"] = batches
    done = subprocess.run(
        [php, str(HARNESS), str(PLUGIN)], capture_output=True, text=True, env=env, timeout=30
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_php_lint() -> None:
    php = shutil.which("php")
    if php is None:
        pytest.fail("php is not installed: `make test` installs Debian's php-cli")
    assert subprocess.run([php, "-l", str(PLUGIN)], capture_output=True).returncode == 0


@pytest.mark.parametrize(("env", "expected"), [("4", 4), (None, 1), ("zero", 1), ("0", 1)])
def test_the_plugin_sets_the_limit_and_stops_web_runners(env: str | None, expected: int) -> None:
    result = json.loads(run_plugin(env))
    assert result == {"batches": expected, "async": False, "wp_cron": 0}


@pytest.mark.parametrize(("plugin", "status", "says"), [
    (str(PLUGIN), 0, "the web runner is disabled"),
    ("-", 1, "bake files/worker/action-scheduler-workers.php into the image"),
])  # fmt: skip
def test_the_worker_helm_test_tells_whether_web_requests_still_run_the_queue(
    plugin: str, status: int, says: str
) -> None:
    """The `wp eval` check of the chart's worker `helm test` pod, taken from the rendered
    pod and run by PHP on the hook API, with the must-use plugin loaded and without it."""
    php = shutil.which("php")
    if php is None:
        pytest.fail("php is not installed: `make test` installs Debian's php-cli")
    script = find(render(ALL_ON), "Pod", "worker-test")["spec"]["containers"][0]["command"][-1]
    match = re.search(r"wp eval --path=\"\$WP_PATH\" '([^']*)'", script)
    assert match is not None, script
    done = subprocess.run(
        [php, str(HARNESS), plugin, match.group(1)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == status, done.stdout + done.stderr
    assert says in done.stdout + done.stderr
