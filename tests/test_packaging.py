"""Installable the way exporters are installed (issue 26, item 1): the sdist and the wheel
the release workflow builds pass `twine check`, and the wheel, installed into a fresh
virtualenv with its runtime dependencies only, serves /metrics from a real database."""

from __future__ import annotations

import os
import subprocess
import urllib.request
import venv
from pathlib import Path

import pytest

from testbed.mariadb import Server, stop_process
from testbed.ports import free_port
from testbed.store import ActionSchedulerStore
from tests.support.waiting import port_open, wait_until

ROOT = Path(__file__).resolve().parent.parent
# Packages of the dev extra that must not come with the wheel.
DEV_ONLY = {"pytest", "ruff", "mypy", "hypothesis", "helm-python-sdk"}


def virtualenv(folder: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    return folder / "bin"


def pip(bin_dir: Path, *args: str) -> None:
    subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", "--disable-pip-version-check", *args],
        check=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The sdist and the wheel, built as the release workflow builds them."""
    work = tmp_path_factory.mktemp("dist")
    tools = virtualenv(work / "tools")
    pip(tools, "build", "twine")
    subprocess.run(
        [str(tools / "python"), "-m", "build", "--sdist", "--wheel", "--outdir",
         str(work / "out"), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    built = sorted((work / "out").iterdir())
    checked = subprocess.run(
        [str(tools / "twine"), "check", "--strict", *map(str, built)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return built


def test_the_sdist_and_the_wheel_pass_twine_check(distributions: list[Path]) -> None:
    names = [path.name for path in distributions]
    assert any(name.endswith(".tar.gz") for name in names), names
    assert any(name.endswith("-py3-none-any.whl") for name in names), names


def test_the_wheel_alone_serves_metrics_from_a_real_database(
    distributions: list[Path],
    tmp_path: Path,
    mariadb: Server,
    database: str,
    store: ActionSchedulerStore,
) -> None:
    store.create("woocommerce_deliver_webhook_async")
    (wheel,) = [path for path in distributions if path.suffix == ".whl"]
    bin_dir = virtualenv(tmp_path / "venv")
    pip(bin_dir, "-c", str(ROOT / "constraints.txt"), str(wheel))
    listed = subprocess.run(
        [str(bin_dir / "pip"), "list", "--format=freeze"], capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    installed = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert not installed & DEV_ONLY, installed & DEV_ONLY
    auth = mariadb.user + (f":{mariadb.password}" if mariadb.password else "")
    port = free_port()
    process = subprocess.Popen(
        [str(bin_dir / "actionscheduler-exporter"), "--web.listen-address", f"127.0.0.1:{port}"],
        env={
            "PATH": os.environ.get("PATH", ""),
            "AS_EXPORTER_DSN": f"mysql://{auth}@{mariadb.host}:{mariadb.port}/{database}",
            "AS_EXPORTER_SITE": "shop",
        },
        cwd=tmp_path,  # nowhere near the source tree: the wheel's code, not the checkout's
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_until(lambda: port_open(port), 30), process.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
            body = answer.read().decode()
        assert 'actionscheduler_up{site="shop"} 1.0' in body
        assert 'actionscheduler_due_actions{site="shop",claim="unclaimed"} 1.0' in body
    finally:
        stop_process(process, timeout=10)
