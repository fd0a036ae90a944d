"""Builds and runs the exporter's container image with podman, offline but for the registries.

Docker Hub is out of reach on the machines this runs on, so the base image is made here:
`debootstrap` installs a minimal Debian with Python from the machine's own apt sources, and
`podman import` turns it into an image that the Dockerfile's `BASE_IMAGE` argument names.
pip inside the build reaches PyPI with the machine's CA bundle, passed as a build secret
(mounted for that one step, never stored in a layer).

Containers run with the limits this machine allows: a process without CAP_SYS_RESOURCE
cannot raise its rlimits, and podman's defaults (1,048,576 open files) are above the host's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE_IMAGE = "localhost/actionscheduler-exporter-base:bookworm"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
# What the base does not need at run time (the image is measured).
BASE_TRIMMED = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
    "usr/share/info",
)
CONTAINER_LIMITS = ("--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")


class PodmanUnavailableError(RuntimeError):
    """Why images cannot be built or run here (the tests skip with this reason)."""


@dataclass(frozen=True)
class Podman:
    """podman as root with runc and cgroupfs, the set-up that works without systemd."""

    binary: str

    @classmethod
    def find(cls) -> Podman:
        binary = shutil.which("podman")
        if binary is None:
            raise PodmanUnavailableError("podman is not installed (Debian package podman)")
        if os.geteuid() != 0:
            raise PodmanUnavailableError("podman runs rootful here: the tests need root")
        if shutil.which("runc") is None:
            raise PodmanUnavailableError("runc is not installed (Debian package runc)")
        podman = cls(binary)
        probe = podman.run("info", "--format", "{{.Host.OCIRuntime.Name}}", check=False)
        if probe.returncode != 0:
            raise PodmanUnavailableError(f"podman cannot run here: {probe.stderr.strip()}")
        return podman

    def command(self, *args: str) -> list[str]:
        return [self.binary, "--runtime", "runc", "--cgroup-manager", "cgroupfs", *args]

    def run(
        self, *args: str, check: bool = True, timeout: float = 600, input: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.command(*args), capture_output=True, input=input, timeout=timeout, check=False
        )
        result = subprocess.CompletedProcess(
            done.args,
            done.returncode,
            done.stdout.decode(errors="replace"),
            done.stderr.decode(errors="replace"),
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args[:2])} failed: {result.stderr.strip()}")
        return result

    def exists(self, image: str) -> bool:
        return self.run("image", "exists", image, check=False).returncode == 0

    def inspect(self, image: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = json.loads(self.run("image", "inspect", image).stdout)
        return found[0]


def debian_mirror(sources: Path = Path("/etc/apt/sources.list.d/debian.sources")) -> str:
    """The Debian mirror this machine's apt uses (deb822 or one-line form)."""
    candidates = [sources, Path("/etc/apt/sources.list")]
    for path in candidates:
        if not path.is_file():
            continue
        text = path.read_text()
        for match in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.M):
            uri = match.group(1)
            if "security" not in uri and "debian" in uri:
                return uri
    return DEBIAN_MIRROR


def ensure_base_image(podman: Podman) -> str:
    """The Debian base with Python, made once per machine with debootstrap."""
    if podman.exists(BASE_IMAGE):
        return BASE_IMAGE
    if shutil.which("debootstrap") is None:
        raise PodmanUnavailableError("debootstrap is not installed (Debian package debootstrap)")
    with tempfile.TemporaryDirectory(prefix="as-image-base-") as workdir:
        rootfs = Path(workdir) / "rootfs"
        bootstrap = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                DEBIAN_SUITE,
                str(rootfs),
                debian_mirror(),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if bootstrap.returncode != 0:
            raise PodmanUnavailableError(
                f"debootstrap failed: {bootstrap.stdout[-800:]}{bootstrap.stderr[-800:]}"
            )
        for trimmed in BASE_TRIMMED:
            shutil.rmtree(rootfs / trimmed, ignore_errors=True)
        archive = subprocess.run(
            ["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True, timeout=300
        ).stdout
        podman.run("import", "-", BASE_IMAGE, input=archive)
    return BASE_IMAGE


def ca_bundle() -> Path | None:
    """The CA bundle pip uses on this machine (a TLS-inspecting proxy's CA lives there)."""
    for variable in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        value = os.environ.get(variable)
        if value and Path(value).is_file():
            return Path(value)
    default = Path("/etc/ssl/certs/ca-certificates.crt")
    return default if default.is_file() else None


def build_image(podman: Podman, tag: str, base: str) -> dict[str, Any]:
    """Builds the repository's Dockerfile on `base`; returns the image's inspection."""
    args = [
        "build",
        "--format",
        "docker",  # keeps HEALTHCHECK, which the OCI format has no field for
        "--network",
        "host",
        "--build-arg",
        f"BASE_IMAGE={base}",
        "--tag",
        tag,
    ]
    bundle = ca_bundle()
    if bundle is not None:
        args += ["--secret", f"id=pip_ca,src={bundle}"]
    podman.run(*args, str(ROOT), timeout=900)
    return podman.inspect(tag)
