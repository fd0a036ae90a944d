"""A Prometheus-family server (Prometheus, Alertmanager) run for a test: its YAML config
and data in a temporary folder of its own, a free loopback port, ready once `/-/ready`
answers."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.mariadb import stop_process, wait_until_ready
from testbed.ports import free_port


def installed(names: tuple[str, ...], package: str) -> str:
    """The path of the first of `names` on PATH; the test fails naming the package if none."""
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.fail(
        f"{names[0]} is not installed: `make test` installs Debian's {package} "
        f"package; run it, or apt-get install {package}"
    )


class Daemon:
    def __init__(
        self,
        name: str,
        binary: str,
        config: dict[str, Any],
        flags: Callable[[Path, int], list[str]],
    ) -> None:
        """Starts `binary` with `--config.file` and `flags(workdir, port)`; its output goes
        to `<name>.log` in the workdir."""
        self._workdir = tempfile.TemporaryDirectory(prefix=f"as-test-{name}-")
        workdir = Path(self._workdir.name)
        config_file = workdir / f"{name}.yml"
        config_file.write_text(yaml.safe_dump(config))
        self.port = free_port()
        self._log = (workdir / f"{name}.log").open("w")
        self._process = subprocess.Popen(
            [binary, f"--config.file={config_file}", *flags(workdir, self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until_ready(f"http://127.0.0.1:{self.port}/-/ready", name)

    def stop(self) -> None:
        stop_process(self._process)
        self._log.close()
        self._workdir.cleanup()
