"""Installable the way exporters are installed (issue 26, item 1): the sdist and the wheel
the release workflow builds pass `twine check`, and the wheel, installed into a fresh
virtualenv with its runtime dependencies only, serves /metrics from a real database."""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
import tomllib
import urllib.request
import venv
import zipfile
from email.message import Message
from email.parser import HeaderParser
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
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], str]:
    """The sdist and the wheel, built as the release workflow builds them, and what the
    build printed (setuptools' warnings among it)."""
    work = tmp_path_factory.mktemp("dist")
    tools = virtualenv(work / "tools")
    pip(tools, "build", "twine")
    done = subprocess.run(
        [str(tools / "python"), "-m", "build", "--sdist", "--wheel", "--outdir",
         str(work / "out"), str(ROOT)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    built = sorted((work / "out").iterdir())
    checked = subprocess.run(
        [str(tools / "twine"), "check", "--strict", *map(str, built)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return built, done.stdout + done.stderr


@pytest.fixture(scope="module")
def distributions(build: tuple[list[Path], str]) -> list[Path]:
    return build[0]


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


REPOSITORY = "https://github.com/actionscheduler-exporter/actionscheduler-exporter"


def metadata(distributions: list[Path]) -> dict[str, Message]:
    """The core metadata of the wheel (METADATA) and of the sdist (PKG-INFO)."""
    found = {}
    for path in distributions:
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as wheel:
                [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
                text = wheel.read(name).decode()
        else:
            with tarfile.open(path) as sdist:
                [member] = [m for m in sdist.getmembers() if m.name.count("/") == 1
                            and m.name.endswith("/PKG-INFO")]  # fmt: skip
                extracted = sdist.extractfile(member)
                assert extracted is not None
                text = extracted.read().decode()
        found[path.name] = HeaderParser().parsestr(text)
    return found


def test_the_metadata_has_an_spdx_license_urls_and_classifiers(
    build: tuple[list[Path], str],
) -> None:
    """Issue 39, item 8: the license as an SPDX expression (setuptools warned about the
    table form), the project's addresses and its classifiers, read from what was built."""
    distributions, output = build
    assert "SetuptoolsDeprecationWarning" not in output, output
    assert "project.license` as a TOML table is deprecated" not in output
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for name, headers in metadata(distributions).items():
        version = tuple(int(part) for part in headers["Metadata-Version"].split("."))
        assert version >= (2, 4), name  # the first with License-Expression
        assert headers["License-Expression"] == "Apache-2.0", name
        assert headers.get_all("License-File") == ["LICENSE"], name
        classifiers = headers.get_all("Classifier") or []
        assert not [c for c in classifiers if c.startswith("License ::")], name
        assert "Topic :: System :: Monitoring" in classifiers, name
        minimum = re.fullmatch(r">=3\.(\d+)", project["requires-python"])
        assert minimum
        pythons = {int(c.rsplit(".", 1)[1]) for c in classifiers
                   if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}  # fmt: skip
        assert pythons and min(pythons) == int(minimum.group(1)), name
        urls = dict(entry.split(", ", 1) for entry in headers.get_all("Project-URL") or [])
        assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
        assert all(url.startswith(REPOSITORY) for url in urls.values()), urls
    (wheel,) = [path for path in distributions if path.suffix == ".whl"]
    with zipfile.ZipFile(wheel) as archive:
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())


def test_the_image_carries_the_oci_labels() -> None:
    """Issue 39, item 8: revision, created, url, documentation and vendor beside title,
    version, licenses and source; revision and created are build arguments."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    final = dockerfile.rsplit("\nFROM ", 1)[1]
    labels = dict(re.findall(r"org\.opencontainers\.image\.(\w+)=\"([^\"]*)\"", final))
    wanted = {"title", "description", "version", "revision", "created", "licenses", "vendor",
              "url", "documentation", "source"}  # fmt: skip
    assert wanted <= set(labels), wanted - set(labels)
    arguments = set(re.findall(r"^ARG (\w+)", final, re.M))
    assert labels["revision"] == "${REVISION}" and "REVISION" in arguments
    assert labels["created"] == "${CREATED}" and "CREATED" in arguments
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert labels["licenses"] == project["license"]
    assert labels["url"] == labels["source"] == project["urls"]["Source"] == REPOSITORY
    assert labels["documentation"].startswith(REPOSITORY)
