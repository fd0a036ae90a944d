"""The GitHub workflows (pushes and pull requests, the release), checked by actionlint with
shellcheck on their scripts: they cannot run here, but they must be valid. The build
scripts that `make` runs, checked by shellcheck too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
SCRIPTS = sorted([*(ROOT / "scripts").glob("*.sh"), ROOT / ".ci" / "run"])


def tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        pytest.fail(f"{name} is not installed: `make test` installs it")
    return found


def test_there_are_a_ci_and_a_release_workflow() -> None:
    assert [path.name for path in WORKFLOWS] == ["ci.yml", "release.yml"]


def test_ci_runs_what_the_readme_runs() -> None:
    """Issue 26, item 8: pushes and pull requests run `make test`, through .ci/run."""
    ci = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    steps = [step.get("run", "") for step in ci["jobs"]["test"]["steps"]]
    assert any("bash .ci/run" in step for step in steps)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda path: path.name)
def test_the_workflow_passes_actionlint_and_shellcheck(workflow: Path) -> None:
    done = subprocess.run(
        [tool("actionlint"), "-shellcheck", tool("shellcheck"), "-pyflakes=", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_release_publishes_a_multi_arch_image_on_a_pinned_base_and_the_chart() -> None:
    release = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    jobs = release["jobs"]
    assert jobs["image"]["needs"] == ["versions", "test"]
    assert jobs["chart"]["needs"] == ["versions", "image"]
    build = next(
        step["with"]
        for step in jobs["image"]["steps"]
        if step.get("uses", "").startswith("docker/build-push-action")
    )
    assert build["platforms"] == "linux/amd64,linux/arm64" and build["push"] is True
    assert "BASE_IMAGE=${{ steps.base.outputs.image }}" in build["build-args"]
    assert any("bash .ci/run" in step.get("run", "") for step in jobs["test"]["steps"])
    assert any("helm push" in step.get("run", "") for step in jobs["chart"]["steps"])


def test_a_broken_workflow_is_caught(tmp_path: Path) -> None:
    """actionlint really checks: an undefined input and an unsafe expression are reported."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - uses: docker/build-push-action@v7\n        with: {platform: linux/amd64}\n"
        '      - run: echo "${{ github.event.head_commit.message }}"\n'
    )
    done = subprocess.run(
        [tool("actionlint"), "-shellcheck=", "-pyflakes=", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert 'input "platform" is not defined' in done.stdout
    assert "potentially untrusted" in done.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_the_build_scripts_pass_shellcheck(script: Path) -> None:
    done = subprocess.run([tool("shellcheck"), str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
