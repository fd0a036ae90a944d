"""The chart's must-use plugin, run by a real PHP against a minimal WordPress hook API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helm_chart import CHART

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
