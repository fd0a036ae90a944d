"""Finds a MariaDB to work against, or starts a private one.

Order: AS_TEST_DSN if set; else root with an empty password on 127.0.0.1:3306; else a
private `mariadbd` on a free port with its data in a folder of the caller's choosing
(installing Debian's mariadb-server first when it is missing and we are root).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pymysql

from testbed.ports import free_port

log = logging.getLogger(__name__)

ENV_DSN = "AS_TEST_DSN"
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/usr/bin")


class MariaDBUnavailableError(RuntimeError):
    pass


@dataclass
class Server:
    host: str
    port: int
    user: str = "root"
    password: str = field(default="", repr=False)
    process: subprocess.Popen[bytes] | None = None
    workdir: Path | None = None
    connect_options: dict[str, Any] = field(default_factory=dict)

    def connect(
        self, database: str | None = None, **options: Any
    ) -> pymysql.connections.Connection[Any]:
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=database,
            autocommit=True,
            charset="utf8mb4",
            connect_timeout=5,
            **options,
        )

    def answers(self) -> bool:
        try:
            self.connect(**self.connect_options).close()
        except pymysql.err.MySQLError:
            return False
        return True

    def stop(self) -> None:
        if self.process is None:
            return
        stop_process(self.process, timeout=30)
        self.process = None


@contextlib.contextmanager
def temporary(start: Callable[[Path], Server]) -> Iterator[Server]:
    """A server started by `start` in a temporary folder, stopped and removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="as-mariadb-") as workdir:
        server = start(Path(workdir))
        try:
            yield server
        finally:
            server.stop()


def ensure_server(workdir: Path, *, install: bool = True, prefer_existing: bool = True) -> Server:
    dsn = os.environ.get(ENV_DSN)
    if dsn and prefer_existing:
        server = from_dsn(dsn)
        if not server.answers():
            raise MariaDBUnavailableError(
                f"{ENV_DSN} is set but its server does not accept the login"
            )
        return server
    if prefer_existing:
        local = Server("127.0.0.1", 3306)
        if local.answers():
            return local
    return start_private(workdir, install=install)


def from_dsn(dsn: str) -> Server:
    parts = urlsplit(dsn)
    return Server(
        parts.hostname or "127.0.0.1",
        parts.port or 3306,
        unquote(parts.username or "root"),
        unquote(parts.password or ""),
    )


def start_private(
    workdir: Path,
    *,
    install: bool = True,
    port: int | None = None,
    extra_arguments: list[str] | None = None,
    connect_options: dict[str, Any] | None = None,
) -> Server:
    mariadbd = _binary("mariadbd")
    install_db = _binary("mariadb-install-db")
    if (mariadbd is None or install_db is None) and install:
        _install_mariadb()
        mariadbd, install_db = _binary("mariadbd"), _binary("mariadb-install-db")
    if mariadbd is None or install_db is None:
        raise MariaDBUnavailableError("mariadbd is not installed (apt-get install mariadb-server)")

    workdir = workdir.resolve()  # mariadb-install-db resolves a relative one against /usr
    workdir.mkdir(parents=True, exist_ok=True)
    datadir = workdir / "data"
    run_as = ["--user=root"] if os.geteuid() == 0 else []
    # A temporary directory of its own: two servers bootstrapping at once in the shared
    # /tmp collided on their temporary tables' names (another test run beside this one).
    tmpdir = workdir / "tmp"
    tmpdir.mkdir(exist_ok=True)
    environment = {**os.environ, "TMPDIR": str(tmpdir)}
    if not (datadir / "mysql").is_dir():
        installed = subprocess.run(
            [
                install_db,
                "--no-defaults",
                f"--datadir={datadir}",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
                *run_as,
            ],
            capture_output=True,
            text=True,
            check=False,
            env=environment,
        )
        if installed.returncode != 0:  # the tool's own words, not a bare exit status
            output = (installed.stderr or installed.stdout).strip()[-2000:]
            raise MariaDBUnavailableError(
                f"mariadb-install-db failed (exit {installed.returncode}) for {datadir}: {output}"
            )
    port = port or free_port()
    error_log = workdir / "error.log"
    process = subprocess.Popen(
        [
            mariadbd,
            "--no-defaults",
            f"--datadir={datadir}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--socket={workdir / 'mariadb.sock'}",
            f"--pid-file={workdir / 'mariadb.pid'}",
            f"--log-error={error_log}",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=256M",
            f"--tmpdir={tmpdir}",
            *run_as,
            *(extra_arguments or []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
    )
    server = Server(
        "127.0.0.1", port, process=process, workdir=workdir, connect_options=connect_options or {}
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.answers():
            return server
        if process.poll() is not None:
            break
        time.sleep(0.2)
    server.stop()
    tail = error_log.read_text(errors="replace")[-2000:] if error_log.exists() else ""
    raise MariaDBUnavailableError(f"private mariadbd did not start; its error log ends:\n{tail}")


def stop_process(process: subprocess.Popen[Any], timeout: float = 20) -> None:
    """SIGTERM, then SIGKILL if it has not ended within the timeout."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until_ready(url: str, what: str, timeout: float = 30) -> None:
    """Polls an HTTP endpoint until it answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not become ready at {url}")


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in _SBIN:
        candidate = Path(folder) / name
        if candidate.is_file():
            return str(candidate)
    return None


def _install_mariadb() -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    log.warning("installing Debian's mariadb-server")
    installer = Path(__file__).resolve().parents[1] / "scripts" / "apt-install.sh"
    subprocess.run([str(installer), "mariadb-server"], check=False, capture_output=True)
