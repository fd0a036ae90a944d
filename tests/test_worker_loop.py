"""The worker loop script, run for real with a stand-in `wp` command."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.helm_chart import CHART
from tests.support.waiting import wait_until

LOOP = CHART / "files" / "worker" / "as-worker-loop.sh"

# A stand-in for WP-CLI: logs each batch's start and end, takes BATCH_SECONDS, and prints
# what `wp action-scheduler run` prints. STAND_IN_MODE: work, idle or fail.
STAND_IN = """#!/bin/sh
echo "start $(date +%s.%N) $*" >> "$STAND_IN_LOG"
case "$STAND_IN_MODE" in
  fail) echo "Error: Error establishing a database connection." >&2; exit 1 ;;
  refused) echo "Error: There are too many concurrent batches." >&2
           echo "end" >> "$STAND_IN_LOG"; exit 1 ;;
  idle) echo "0 batches executed."; echo "Success: 0 scheduled tasks completed."
        echo "end" >> "$STAND_IN_LOG"; exit 0 ;;
esac
echo "Found 3 scheduled tasks"
sleep "${BATCH_SECONDS:-1}"
echo "1 batch executed."
echo "Success: 3 scheduled tasks completed."
echo "end $(date +%s.%N)" >> "$STAND_IN_LOG"
"""


RunLoop = Callable[..., tuple[subprocess.Popen[str], Path]]


@pytest.fixture
def run_loop() -> Iterator[RunLoop]:
    """Starts the loop with a stand-in wp; every loop started is killed at the end, on
    failure too."""
    started: list[subprocess.Popen[str]] = []

    def start(
        tmp_path: Path, mode: str, *args: str, **env: str
    ) -> tuple[subprocess.Popen[str], Path]:
        wp = tmp_path / "wp"
        wp.write_text(STAND_IN)
        wp.chmod(0o755)
        log = tmp_path / "batches.log"
        log.touch()
        process = subprocess.Popen(
            # The shell that started the tests may have ignored SIGINT or SIGQUIT, and a
            # shell cannot trap a signal it inherited as ignored: give the loop the
            # default dispositions, as a container's process gets them.
            ["env", "--default-signal", "/bin/sh", str(LOOP), *args],
            env={
                "PATH": os.environ["PATH"],
                "WP_CLI": str(wp),
                "STAND_IN_MODE": mode,
                "STAND_IN_LOG": str(log),
                "AS_HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
                "TMPDIR": str(tmp_path),
                **env,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(process)
        return process, log

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def wait_for_line(log: Path, prefix: str, count: int = 1, timeout: float = 10) -> None:
    def appeared() -> bool:
        return sum(line.startswith(prefix) for line in log.read_text().splitlines()) >= count

    assert wait_until(appeared, timeout, interval=0.05), (
        f"{prefix!r} did not appear {count} times: {log.read_text()}"
    )


def test_shellcheck_and_sh_n() -> None:
    checker = shutil.which("shellcheck")
    if checker is None:
        pytest.fail("shellcheck is not installed: `make test` installs Debian's shellcheck")
    assert subprocess.run([checker, str(LOOP)], capture_output=True).returncode == 0
    assert subprocess.run(["sh", "-n", str(LOOP)]).returncode == 0


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGQUIT])
def test_a_stop_signal_lets_the_running_batch_finish(
    tmp_path: Path, stop_signal: signal.Signals, run_loop: RunLoop
) -> None:
    process, log = run_loop(tmp_path, "work", BATCH_SECONDS="2")
    wait_for_line(log, "start")  # the batch runs (for 2 s)
    sent = time.time()
    process.send_signal(stop_signal)
    output, _ = process.communicate(timeout=20)
    lines = log.read_text().splitlines()
    assert process.returncode == 0, output
    assert [line.split()[0] for line in lines] == ["start", "end"], lines
    assert float(lines[1].split()[1]) > sent  # the batch ended after the signal: it waited
    assert "Success: 3 scheduled tasks completed." in output
    assert "stopped after 1 batches" in output


def test_it_sleeps_when_nothing_is_due(tmp_path: Path, run_loop: RunLoop) -> None:
    process, log = run_loop(tmp_path, "idle", AS_IDLE_SLEEP="1")
    wait_for_line(log, "start", count=3)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=10)
    starts = [
        float(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("start")
    ]
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert all(gap >= 0.9 for gap in gaps), gaps
    assert (tmp_path / "heartbeat").exists()


def test_a_signal_during_the_idle_sleep_stops_at_once(tmp_path: Path, run_loop: RunLoop) -> None:
    process, log = run_loop(tmp_path, "idle", AS_IDLE_SLEEP="30")
    wait_for_line(log, "end")
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=10)  # far less than the 30 s sleep
    assert process.returncode == 0


def test_busy_batches_follow_each_other_without_sleeping(tmp_path: Path, run_loop: RunLoop) -> None:
    process, log = run_loop(tmp_path, "work", BATCH_SECONDS="0.2", AS_IDLE_SLEEP="30")
    wait_for_line(log, "end", count=3)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=10)
    assert process.returncode == 0


def test_it_exits_non_zero_after_repeated_failures(tmp_path: Path, run_loop: RunLoop) -> None:
    process, log = run_loop(tmp_path, "fail", AS_MAX_FAILURES="3", AS_IDLE_SLEEP="0.1")
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 1
    assert len(log.read_text().splitlines()) == 3
    assert "giving up after 3 failed batches" in output
    assert "Error establishing a database connection" in output


def test_cronjob_form_stops_after_its_batches_or_when_idle(
    tmp_path: Path, run_loop: RunLoop
) -> None:
    (tmp_path / "busy").mkdir()
    busy, busy_log = run_loop(tmp_path / "busy", "work", BATCH_SECONDS="0.1", AS_MAX_BATCHES="3")
    busy.communicate(timeout=20)
    assert busy.returncode == 0
    assert (
        len([line for line in busy_log.read_text().splitlines() if line.startswith("start")]) == 3
    )
    (tmp_path / "idle").mkdir()
    idle, idle_log = run_loop(tmp_path / "idle", "idle", AS_MAX_BATCHES="3")
    output, _ = idle.communicate(timeout=20)
    assert idle.returncode == 0
    assert len(idle_log.read_text().splitlines()) == 2  # one start, one end
    assert "nothing due, stopping" in output


def test_a_runner_refused_at_the_concurrent_batches_limit_has_not_failed(
    tmp_path: Path, run_loop: RunLoop
) -> None:
    """Issue 16: "too many concurrent batches" is the limit working, not a failed batch: it
    must not count towards AS_MAX_FAILURES and restart the worker."""
    process, log = run_loop(tmp_path, "refused", AS_MAX_FAILURES="2", AS_IDLE_SLEEP="0.1")
    wait_for_line(log, "start", count=5)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=10)
    assert process.returncode == 0, output
    assert "giving up" not in output
    assert "refused: the concurrent-batches limit is reached" in output


def test_arguments_reach_wp_action_scheduler_run(tmp_path: Path, run_loop: RunLoop) -> None:
    """Issue 16: dedicated runners (--group=..., --exclude-groups=...) and multisite (--url)."""
    process, log = run_loop(
        tmp_path, "idle", "--exclude-groups=reports", "--url=shop.example/de", AS_MAX_BATCHES="1"
    )
    process.communicate(timeout=20)
    (start,) = [line for line in log.read_text().splitlines() if line.startswith("start")]
    assert start.endswith("--exclude-groups=reports --url=shop.example/de")
    assert "action-scheduler run --batches=1" in start
