"""The files that keep the project's habits: the pre-commit hooks run what `make check`
runs, the image installs the pinned versions, and the pins cover every dependency."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def pinned() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pins = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {name.lower().replace("_", "-"): version for name, version in pins}


def test_every_dependency_is_pinned() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    names = {re.split(r"[<>=!\[ ]", item, maxsplit=1)[0].lower().replace("_", "-")
             for item in wanted}  # fmt: skip
    assert names <= set(pinned()), names - set(pinned())


def test_the_image_and_the_makefile_install_with_the_constraints() -> None:
    assert "-c constraints.txt" in (ROOT / "Dockerfile").read_text()
    assert "!constraints.txt" in (ROOT / ".dockerignore").read_text()
    assert "-c constraints.txt" in (ROOT / "Makefile").read_text()


def test_pre_commit_runs_the_checks_of_make_check() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    entries = [hook["entry"] for repo in config["repos"] for hook in repo["hooks"]]
    for command in ("ruff format", "ruff check", "mypy", "pytest -q tests/unit"):
        assert any(command in entry for entry in entries), command
    assert any("actionscheduler_exporter.metrics.docs --check" in entry for entry in entries)


def test_license_matches_the_package_metadata() -> None:
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"


def test_the_dockerfile_passes_hadolint() -> None:
    """Issue 16: the image's recipe is linted as the ecosystem lints it."""
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    done = subprocess.run(
        [hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_checks_its_health_on_the_port_it_serves() -> None:
    """Issue 16: the HEALTHCHECK hard-coded port 9966; it now runs the exporter's own
    healthcheck, which reads the listen address the server reads."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["actionscheduler-exporter", "healthcheck"]' in dockerfile
    assert "AS_EXPORTER_LISTEN_ADDRESS=:9966" in dockerfile
    assert "9966/healthz" not in dockerfile
    assert "FROM ${BASE_IMAGE}" in dockerfile
