"""The container image, built from the Dockerfile with podman and run as Kubernetes runs it:
read-only root filesystem, its own non-root user, the config mounted, against real MariaDB.

Skips, naming the reason, where podman cannot build or run images (not root, no podman).
"""

from __future__ import annotations

import secrets
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from testbed.image import (
    CONTAINER_LIMITS,
    Podman,
    PodmanUnavailableError,
    build_image,
    ensure_base_image,
)
from testbed.mariadb import Server
from testbed.ports import free_port
from testbed.store import ActionSchedulerStore
from tests.support.helm_chart import ALL_ON, find, merged, render
from tests.support.scenarios import killed_worker
from tests.support.truth import compute
from tests.support.waiting import port_open, wait_until

# What the exporter adds to the base: its virtualenv (measured: 27 MB).
MAX_ADDED_BYTES = 40_000_000
NON_ROOT_USER = "65532:65532"


@pytest.fixture(scope="module")
def podman() -> Podman:
    try:
        return Podman.find()
    except PodmanUnavailableError as reason:
        pytest.skip(f"the image cannot be built here: {reason}")


@pytest.fixture(scope="module")
def image(podman: Podman) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    try:
        base = ensure_base_image(podman)
    except PodmanUnavailableError as reason:
        pytest.skip(f"no base image can be made here: {reason}")
    tag = f"localhost/actionscheduler-exporter:test-{secrets.token_hex(4)}"
    inspected = build_image(podman, tag, base)
    yield tag, inspected, podman.inspect(base)
    podman.run("rmi", "--force", tag, check=False)


@pytest.fixture
def container(
    podman: Podman,
    image: tuple[str, dict[str, Any], dict[str, Any]],
    mariadb: Server,
    database: str,
    tmp_path: Path,
) -> Iterator[tuple[str, int]]:
    config = tmp_path / "exporter.yml"
    config.write_text(
        "sites:\n"
        "  - name: shop\n"
        f"    host: {mariadb.host}\n"
        f"    port: {mariadb.port}\n"
        f"    user: {mariadb.user}\n"
        f'    password: "{mariadb.password}"\n'
        f"    database: {database}\n"
    )
    config.chmod(0o644)  # the image's user is not the file's owner
    port = free_port()
    name = f"as-exporter-test-{secrets.token_hex(4)}"
    podman.run(
        "run",
        "--detach",
        "--name",
        name,
        "--read-only",
        "--network",
        "host",
        *CONTAINER_LIMITS,
        "--volume",
        f"{config}:/etc/actionscheduler-exporter/exporter.yml:ro",
        # Not the default port: the healthcheck must follow the server.
        "--env",
        f"AS_EXPORTER_LISTEN_ADDRESS=127.0.0.1:{port}",
        image[0],
    )
    try:
        yield name, port
    finally:
        podman.run("rm", "--force", "--time", "5", name, check=False)


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        body = response.read().decode()
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_the_image_serves_the_queue_read_only_as_its_non_root_user(
    podman: Podman,
    container: tuple[str, int],
    store: ActionSchedulerStore,
    connect: Any,
) -> None:
    killed_worker(store)
    truth = compute(connect())
    name, port = container
    assert wait_until(lambda: port_open(port), timeout=60), podman.run("logs", name).stderr

    metrics = scrape(port)
    assert metrics["actionscheduler_up"] == {(("site", "shop"),): 1.0}
    due = metrics["actionscheduler_due_actions"]
    assert due[(("claim", "unclaimed"), ("site", "shop"))] == truth.due_unclaimed
    assert due[(("claim", "claimed"), ("site", "shop"))] == truth.due_claimed

    assert podman.run("exec", name, "id", "-u").stdout.strip() == "65532"
    write = podman.run("exec", name, "touch", "/opt/exporter/written", check=False)
    assert write.returncode != 0 and "Read-only file system" in write.stderr


def test_the_healthcheck_follows_the_listen_address(
    podman: Podman,
    image: tuple[str, dict[str, Any], dict[str, Any]],
    container: tuple[str, int],
) -> None:
    name, port = container
    assert wait_until(lambda: port_open(port), timeout=60), podman.run("logs", name).stderr
    healthcheck = image[1]["Healthcheck"]["Test"]
    assert healthcheck[0] == "CMD"
    # The image's own HEALTHCHECK command, run as the runtime runs it (podman's timer needs
    # systemd, which this machine does not run).
    healthy = podman.run("exec", name, *healthcheck[1:], check=False)
    assert healthy.returncode == 0, healthy.stderr
    elsewhere = podman.run(
        "exec",
        "--env",
        f"AS_EXPORTER_LISTEN_ADDRESS=127.0.0.1:{free_port()}",
        name,
        *healthcheck[1:],
        check=False,
    )
    assert elsewhere.returncode != 0


def test_the_image_stops_cleanly_on_sigterm(podman: Podman, container: tuple[str, int]) -> None:
    name, port = container
    assert wait_until(lambda: port_open(port), timeout=60), podman.run("logs", name).stderr
    podman.run("stop", "--time", "10", name)
    state = podman.run("inspect", name, "--format", "{{.State.ExitCode}} {{.State.Status}}")
    assert state.stdout.split() == ["0", "exited"]


def test_the_image_is_small_runs_as_non_root_and_holds_no_build_secret(
    podman: Podman, image: tuple[str, dict[str, Any], dict[str, Any]]
) -> None:
    tag, inspected, base = image
    added = inspected["Size"] - base["Size"]
    assert 0 < added <= MAX_ADDED_BYTES, f"the exporter adds {added / 1e6:.1f} MB to its base"
    assert inspected["Config"]["User"] == NON_ROOT_USER
    assert not any(item.startswith("PIP_CERT") for item in inspected["Config"]["Env"])
    # The CA bundle was a build secret: in no layer, anywhere in the filesystem.
    listing = podman.run(
        "run",
        "--rm",
        "--no-healthcheck",
        *CONTAINER_LIMITS,
        "--user",
        "0:0",
        "--entrypoint",
        "find",
        tag,
        "/",
        "-xdev",
        "-name",
        "*pip_ca*",
    )
    assert listing.stdout.strip() == ""
    versions = podman.run(
        "run", "--rm", "--no-healthcheck", *CONTAINER_LIMITS, "--entrypoint", "pip", tag, "freeze"
    ).stdout
    pinned = {
        line.split("==")[0].lower(): line
        for line in (Path(__file__).parent.parent / "constraints.txt").read_text().splitlines()
        if "==" in line
    }
    for line in versions.splitlines():
        package = line.split("==")[0].lower()
        if "==" in line and package != "actionscheduler-exporter":
            assert pinned.get(package) == line, f"{line} is not the version CI tested"


def test_the_charts_helm_test_pod_passes_against_the_running_image(
    podman: Podman,
    image: tuple[str, dict[str, Any], dict[str, Any]],
    container: tuple[str, int],
    store: ActionSchedulerStore,
) -> None:
    """The chart's `helm test` pod (test-metrics), run as Kubernetes would run it: its
    image, command and user, with the Service's name resolving to the exporter."""
    store.create("woocommerce_deliver_webhook_async")
    name, port = container
    assert wait_until(lambda: port_open(port), timeout=60), podman.run("logs", name).stderr
    repository, tag = image[0].rsplit(":", 1)
    values = merged(ALL_ON, **{"service.port": port, "image.repository": repository,
                               "image.tag": tag})  # fmt: skip
    pod = find(render(values), "Pod", "test-metrics")
    spec = pod["spec"]["containers"][0]
    assert spec["image"] == image[0]
    service = "shop-actionscheduler-exporter"  # the chart's Service in release "shop"
    executable, *arguments = spec["command"]
    ran = podman.run(
        "run",
        "--rm",
        "--no-healthcheck",
        "--read-only",
        "--network",
        "host",
        "--add-host",
        f"{service}:127.0.0.1",
        "--user",
        str(pod["spec"]["securityContext"]["runAsUser"]),
        *CONTAINER_LIMITS,
        "--entrypoint",
        executable,
        spec["image"],
        *arguments,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert 'actionscheduler_up{site="shop"} 1.0' in ran.stdout


def test_the_image_runs_from_the_environment_alone(
    podman: Podman,
    image: tuple[str, dict[str, Any], dict[str, Any]],
    mariadb: Server,
    database: str,
    store: ActionSchedulerStore,
) -> None:
    """Issue 26, item 2: `docker run -e AS_EXPORTER_DSN=...` failed (the image forced
    --config and no file was mounted). Now the environment's site is served."""
    store.create("woocommerce_deliver_webhook_async")
    auth = mariadb.user + (f":{mariadb.password}" if mariadb.password else "")
    port = free_port()
    name = f"as-exporter-env-{secrets.token_hex(4)}"
    podman.run(
        "run", "--detach", "--name", name, "--read-only", "--network", "host",
        *CONTAINER_LIMITS,
        "--env", f"AS_EXPORTER_DSN=mysql://{auth}@{mariadb.host}:{mariadb.port}/{database}",
        "--env", "AS_EXPORTER_SITE=shop",
        "--env", f"AS_EXPORTER_LISTEN_ADDRESS=127.0.0.1:{port}",
        image[0],
    )  # fmt: skip
    try:
        assert wait_until(lambda: port_open(port), timeout=60), podman.run("logs", name).stderr
        metrics = scrape(port)
        assert metrics["actionscheduler_up"] == {(("site", "shop"),): 1.0}
        assert (
            metrics["actionscheduler_due_actions"][(("claim", "unclaimed"), ("site", "shop"))] == 1
        )
    finally:
        podman.run("rm", "--force", "--time", "5", name, check=False)
