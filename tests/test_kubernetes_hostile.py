"""Issue 36, item 7: a hostile or broken Kubernetes API (the local fake of
tests/support/fake_kubernetes.py in its `hostile` modes). A nested, dripped, huge or
token-echoing answer is one counted failure (`kubernetes_up 0`), ends within the call's
deadline, costs a bounded read, and never puts the API's raw text in a log line."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from actionscheduler_exporter.collectors.workers import KubernetesWorkers
from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.kubernetes.client import KubernetesError
from actionscheduler_exporter.kubernetes.transport import MAX_BODY_BYTES
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.rounds.result import SiteResult
from actionscheduler_exporter.scrape.coordinator import Coordinator
from testbed.store import ActionSchedulerStore
from tests.support.fake_kubernetes import FakeKubernetes, kubernetes_config
from tests.support.waiting import wait_until

# What a service-account token looks like (a JWT), for the echo tests.
JWT = (
    "eyJhbGciOiJSUzI1NiIsImtpZCI6InNob3AifQ."
    "eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6c2hvcDpleHBvcnRlciJ9."
    "c2lnbmF0dXJlLW9mLXRoZS1zZXJ2aWNlLWFjY291bnQtdG9rZW4"
)


def errors(result: SiteResult, kind: str) -> float:
    return result.value(catalog.KUBERNETES_ERRORS.name, kind=kind) or 0.0


@pytest.fixture
def thread_failures(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """Exceptions that escaped a thread (the refresh thread's RecursionError did)."""
    failures: list[BaseException] = []

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            failures.append(args.exc_value)

    monkeypatch.setattr(threading, "excepthook", hook)
    return failures


@pytest.fixture
def coordinator(
    api: FakeKubernetes, store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> Iterator[Coordinator]:
    store.create("woocommerce_deliver_webhook_async")
    running = Coordinator(
        ExporterConfig(sites=(site(kubernetes=kubernetes_config(api, timeout=1.0)),))
    )
    yield running
    running.close()


def scrape(coordinator: Coordinator, budget: float = 10.0) -> SiteResult:
    (result,) = coordinator.scrape(budget)
    assert result.up, result.problems
    assert result.value("actionscheduler_due_actions", claim="unclaimed") == 1
    return result


@pytest.mark.parametrize("status", [200, 500])
def test_a_deeply_nested_answer_is_a_counted_failure(
    api: FakeKubernetes,
    coordinator: Coordinator,
    status: int,
    thread_failures: list[BaseException],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """200,000 `[` raised RecursionError in the refresh thread: a traceback per refresh,
    nothing counted, kubernetes_up 1 on stale values."""
    assert scrape(coordinator).value("actionscheduler_kubernetes_up") == 1
    api.hostile, api.hostile_status = "deep", status
    assert wait_until(lambda: errors(scrape(coordinator), "http") >= 2, 30)
    result = scrape(coordinator)
    assert result.value("actionscheduler_kubernetes_up") == 0
    assert result.value(catalog.COLLECTOR_SUCCESS.name, collector="kubernetes") == 0
    assert thread_failures == []
    assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text
    with pytest.raises(KubernetesError) as raised:
        KubernetesWorkers(kubernetes_config(api)).read()
    assert raised.value.kind == "http"
    if status == 200:
        assert "nested too deep" in raised.value.message
    else:
        assert "HTTP 500" in raised.value.message
        assert len(raised.value.message) < 400  # not the 200,000 brackets


def test_a_dripping_api_is_cut_at_the_deadline_and_the_scrape_recovers(
    api: FakeKubernetes, coordinator: Coordinator, thread_failures: list[BaseException]
) -> None:
    """A byte every 0.2 s never trips a per-read timeout of 1 s: the call must end at its
    deadline, count a timeout, and free the refresh for the API's recovery."""
    assert scrape(coordinator).value("actionscheduler_kubernetes_up") == 1
    api.hostile = "drip"

    ended: list[KubernetesError] = []

    def read() -> None:
        try:
            KubernetesWorkers(kubernetes_config(api, timeout=1.0)).read()
        except KubernetesError as error:
            ended.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(15.0)  # the deadline is 1 s; the drip would last ten minutes
    assert ended, "the call did not end at its deadline"
    assert ended[0].kind == "timeout"
    assert "within 1s" in ended[0].message
    # The exporter closed the dripping connection: the fake's writes failed.
    assert wait_until(lambda: len(api.sent) >= 1, 10)

    def down() -> bool:
        result = scrape(coordinator)
        return result.value("actionscheduler_kubernetes_up") == 0 and errors(result, "timeout") >= 1

    assert wait_until(down, 30)
    api.hostile = ""  # the API recovers (the fake stops dripping to new connections)
    assert wait_until(lambda: scrape(coordinator).value("actionscheduler_kubernetes_up") == 1, 30)
    started = time.monotonic()
    result = scrape(coordinator, budget=10.0)
    assert time.monotonic() - started < 5.0  # not the whole budget, waiting on a stuck call
    assert result.value("actionscheduler_kubernetes_up") == 1
    assert thread_failures == []


@pytest.mark.parametrize("mode", ["huge", "huge_declared"])
def test_a_huge_answer_is_refused_after_a_bounded_read(api: FakeKubernetes, mode: str) -> None:
    """A 400 MB pod list was read whole (RSS +265 to +800 MB; the chart allows 160Mi).
    The fake counts what it got out before the exporter closed the connection."""
    api.hostile = mode
    with pytest.raises(KubernetesError) as raised:
        KubernetesWorkers(kubernetes_config(api, timeout=30.0)).read()
    assert raised.value.kind == "http"
    assert f"{MAX_BODY_BYTES:,} bytes the exporter reads" in raised.value.message
    if mode == "huge_declared":
        assert "declares 419,430,3" in raised.value.message
    assert wait_until(lambda: len(api.sent) == 1, 30)
    # The body read, and what the two sockets' kernel buffers held (a few MB each).
    assert api.sent[0] < MAX_BODY_BYTES + 32 * 1024 * 1024
    assert api.sent[0] < api.huge_bytes // 10


@pytest.mark.parametrize(
    ("mode", "status"),
    [("echo", 401), ("echo", 403), ("echo", 500), ("echo_text", 401), ("echo_text", 502)],
)
def test_the_apis_error_text_is_never_logged_raw(
    api: FakeKubernetes,
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
    caplog: pytest.LogCaptureFixture,
    mode: str,
    status: int,
) -> None:
    """The API's text was logged verbatim, the token included when the API echoed the
    Authorization header; a newline or an ANSI escape in it forged log lines."""
    api.token = JWT
    api.hostile, api.hostile_status = mode, status
    with pytest.raises(KubernetesError) as raised:
        KubernetesWorkers(kubernetes_config(api)).read()
    message = raised.value.message
    assert f"HTTP {status}" in message
    assert "invalid bearer token" in message  # the gist of what the API said stays
    assert "Bearer [redacted]" in message
    assert JWT not in message and JWT[:40] not in message and JWT[-30:] not in message
    assert "\n" not in message and "\x1b" not in message

    coordinator = Coordinator(ExporterConfig(sites=(site(kubernetes=kubernetes_config(api)),)))
    try:
        (result,) = coordinator.scrape(10.0)
    finally:
        coordinator.close()
    assert result.value("actionscheduler_kubernetes_up") == 0
    assert f"HTTP {status}" in caplog.text
    assert JWT[:40] not in caplog.text and JWT[-30:] not in caplog.text
    assert "\x1b" not in caplog.text and "\nlevel=info msg=forged" not in caplog.text
