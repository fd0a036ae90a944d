"""The exporter over real HTTP: endpoints, content negotiation, bad requests, and scrapes
while the queue is being written to."""

from __future__ import annotations

import dataclasses
import gzip
import http.client
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as parse_text

from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.exposition import writer
from actionscheduler_exporter.exposition.family_parts import Part
from actionscheduler_exporter.exposition.render import answer_parts
from actionscheduler_exporter.web import metrics_route
from testbed.mariadb import Server
from testbed.metrics_proto import family_names
from testbed.proxy import SlowProxy
from testbed.store import ActionSchedulerStore
from tests.support.http_server import RunningExporter
from tests.support.locks import tables_locked
from tests.support.truth import compute
from tests.support.waiting import wait_until

StartExporter = Callable[..., RunningExporter]


def samples(body: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in parse_text(body)
        for s in family.samples
        if s.name == name
    }


def test_metrics_in_text_and_openmetrics(
    store: ActionSchedulerStore, exporter_http: StartExporter
) -> None:
    store.create("woocommerce_deliver_webhook_async")
    running = exporter_http()
    status, content_type, body = running.get("/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    assert samples(body, "actionscheduler_up") == {(("site", "shop"),): 1.0}
    assert (
        samples(body, "actionscheduler_due_actions")[(("claim", "unclaimed"), ("site", "shop"))]
        == 1.0
    )

    status, content_type, body = running.get(
        "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"}
    )
    assert status == 200 and content_type.startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")
    names = {family.name for family in text_string_to_metric_families(body)}  # type: ignore[no-untyped-call]
    assert {
        "actionscheduler_up",
        "actionscheduler_exporter_errors",
        "actionscheduler_exporter_build",
    } <= names


def test_healthz_and_landing_page_without_secrets(
    mariadb: Server, database: str, exporter_http: StartExporter, site: Callable[..., SiteConfig]
) -> None:
    running = exporter_http(
        site(name="shop", password="pa55-w0rd-xyz"), site(name="blog", table_prefix="auto")
    )
    assert running.get("/healthz")[:3:2] == (200, "ok\n")
    status, content_type, page = running.get("/")
    assert status == 200 and content_type.startswith("text/html")
    assert "shop" in page and "blog" in page
    # Issue 13: whoever reaches the port learns no database user, host or name from it.
    assert database not in page and mariadb.user not in page and str(mariadb.port) not in page
    assert "href='metrics'" in page and "href='healthz'" in page
    assert "pa55-w0rd-xyz" not in page
    assert "pa55-w0rd-xyz" not in running.get("/metrics")[2]


def test_bad_requests_get_clear_answers(
    store: ActionSchedulerStore, exporter_http: StartExporter
) -> None:
    running = exporter_http()
    status, _, body = running.get("/metrics", {"X-Prometheus-Scrape-Timeout-Seconds": "soon"})
    assert status == 400
    assert "X-Prometheus-Scrape-Timeout-Seconds must be a number" in body
    status, _, body = running.get("/metrics", {"X-Prometheus-Scrape-Timeout-Seconds": "-3"})
    assert status == 400 and "must be positive" in body
    assert running.get("/no-such-page")[0] == 404
    # A valid header from Prometheus is honoured.
    status, _, body = running.get("/metrics", {"X-Prometheus-Scrape-Timeout-Seconds": "5"})
    assert status == 200 and "actionscheduler_up" in body
    # Issue 25, item 5: huge ones were a 500 (OverflowError) for every scrape of the round.
    for huge in ("1e10", "inf", "9e15"):
        status, _, body = running.get("/metrics", {"X-Prometheus-Scrape-Timeout-Seconds": huge})
        assert status == 200 and "actionscheduler_up" in body
    status, _, body = running.get("/metrics", {"X-Prometheus-Scrape-Timeout-Seconds": "nan"})
    assert status == 400 and "must be positive" in body


def test_the_telemetry_path_refuses_other_methods_and_reads_the_first_header(
    store: ActionSchedulerStore, exporter_http: StartExporter
) -> None:
    """/metrics is answered in front of FastAPI's routing (performance.md): its other
    methods are refused as a route's are, and a header sent twice counts once, as for
    Starlette's readers."""
    running = exporter_http()
    connection = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
    try:
        for method in ("POST", "PUT", "DELETE"):
            connection.request(method, "/metrics", body=b"x")
            refused = connection.getresponse()
            assert refused.status == 405 and refused.getheader("Allow") == "GET, HEAD"
            assert refused.read() == b"Method Not Allowed\n"
        connection.putrequest("GET", "/metrics?name=ignored")
        connection.putheader("Accept", "application/openmetrics-text; version=1.0.0")
        connection.putheader("Accept", "text/plain; version=0.0.4")
        connection.putheader("X-Prometheus-Scrape-Timeout-Seconds", "never")
        connection.putheader("X-Prometheus-Scrape-Timeout-Seconds", "5")
        connection.endheaders()
        first = connection.getresponse()
        assert first.status == 400 and b"must be a number" in first.read()
        connection.putrequest("GET", "/metrics")
        connection.putheader("Accept", "application/openmetrics-text; version=1.0.0")
        connection.putheader("Accept", "text/plain; version=0.0.4")
        connection.endheaders()
        answered = connection.getresponse()
        body = answered.read()
        assert answered.status == 200 and body.endswith(b"# EOF\n")
        assert answered.getheader("Content-Length") == str(len(body))
        assert answered.getheader("Content-Type", "").startswith("application/openmetrics-text")
    finally:
        connection.close()
    # Every other path is still FastAPI's.
    assert running.get("/metrics/extra")[0] == 404
    assert running.get("/healthz")[:3:2] == (200, "ok\n")


def test_head_and_gzip_as_prometheus_asks(
    store: ActionSchedulerStore, exporter_http: StartExporter
) -> None:
    """Issue 25, item 8: HEAD /metrics was a 405, and no answer was compressed though
    Prometheus asks for gzip (1.26 MB of text for 200 sites)."""
    running = exporter_http()
    connection = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
    try:
        connection.request("HEAD", "/metrics")
        head = connection.getresponse()
        assert head.status == 200 and head.read() == b""
        assert head.getheader("Content-Type", "").startswith("text/plain")
        connection.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
        zipped = connection.getresponse()
        assert zipped.status == 200 and zipped.getheader("Content-Encoding") == "gzip"
        # The body depends on both headers (the format and the coding): caches key on both.
        assert zipped.getheader("Vary") == "Accept, Accept-Encoding"
        text = gzip.decompress(zipped.read()).decode()
        assert "actionscheduler_up" in text
        # Issue 36, item 10: refused after a star, or with a parameter after its weight.
        for refusing in ("gzip;q=0", "*;q=1, gzip;q=0", "gzip;q=0;level=1"):
            connection.request("GET", "/metrics", headers={"Accept-Encoding": refusing})
            plain = connection.getresponse()
            assert plain.getheader("Content-Encoding") is None, refusing
            assert "actionscheduler_up" in plain.read().decode()
    finally:
        connection.close()


def test_a_large_answer_is_sent_family_by_family_as_it_is_written(
    store: ActionSchedulerStore, exporter_http: StartExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: a thousand stores' answer (15 MB) was held whole twice more, as one body
    and in the socket's buffer, taking the exporter past the chart's memory limit. Past
    `_PIECE` bytes the answer goes chunked, a family at a time, and reads the same, plain
    and compressed (here every answer is past a piece of one byte): each piece is whole
    lines."""
    store.create("woocommerce_deliver_webhook_async")
    running = exporter_http()
    whole = _raw_get(running.port, {})
    assert whole.headers["content-length"] == str(len(whole.body))
    binary = _raw_get(running.port, {"Accept": PROTOBUF_ACCEPT})
    assert binary.headers["content-length"] == str(len(binary.body))
    monkeypatch.setattr(metrics_route, "_PIECE", 1)
    monkeypatch.setattr(writer, "ONE_PART_SITES", 0)  # one store's text in parts too
    pieces = _raw_get(running.port, {})
    assert pieces.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in pieces.headers
    assert len(pieces.chunks) > 10
    assert pieces.chunks[0].startswith(b"# HELP ")
    assert all(chunk.endswith(b"\n") for chunk in pieces.chunks)
    assert pieces.chunks[-1] == b"# EOF\n"
    assert _series(pieces.body) == _series(whole.body)
    zipped = _raw_get(running.port, {"Accept-Encoding": "gzip"})
    assert zipped.headers.get("content-encoding") == "gzip"
    assert zipped.headers.get("transfer-encoding") == "chunked"
    assert _series(gzip.decompress(zipped.body)) == _series(whole.body)
    # HEAD is told the length GET would send; HTTP/1.0 has no chunks; the protobuf
    # format goes a family (a message) at a time too.
    head = _raw_get(running.port, {}, method="HEAD")
    assert int(head.headers["content-length"]) > 1000
    assert "transfer-encoding" not in head.headers
    old = _raw_get(running.port, {}, version="1.0")
    assert old.headers["content-length"] == str(len(old.body))
    assert _series(old.body) == _series(whole.body)
    messages = _raw_get(running.port, {"Accept": PROTOBUF_ACCEPT})
    assert messages.headers.get("transfer-encoding") == "chunked" and len(messages.chunks) > 10
    assert family_names(messages.body) == family_names(binary.body)
    assert "actionscheduler_up" in family_names(binary.body)


def test_nothing_more_is_written_once_the_client_has_gone(
    store: ActionSchedulerStore, exporter_http: StartExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scraper that stops waiting for a large answer (Prometheus at its timeout, with a
    thousand stores' 15 MB) closes its connection: the writing stops there, instead of
    spending the rest of the exporter's CPU on an answer nobody reads."""
    store.create("woocommerce_deliver_webhook_async")
    running = exporter_http()
    taken: list[int] = []  # per answer, the parts written before it ended

    def counted(*arguments: object, **options: object) -> Iterator[Part]:
        parts = answer_parts(*arguments, **options)  # type: ignore[arg-type]
        count = 0
        try:
            for part in parts:
                count += 1
                yield part
        finally:
            taken.append(count)

    monkeypatch.setattr(metrics_route, "answer_parts", counted)
    monkeypatch.setattr(metrics_route, "_PIECE", 1)
    monkeypatch.setattr(writer, "ONE_PART_SITES", 0)
    whole = _raw_get(running.port, {})
    assert len(whole.chunks) > 10
    assert wait_until(lambda: len(taken) == 1, 30)
    every = taken[0]
    request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", running.port), timeout=30) as leaving:
        leaving.sendall(request.encode())
    assert wait_until(lambda: len(taken) == 2, 30)
    assert taken[1] < every / 2
    assert _series(_raw_get(running.port, {}).body) == _series(whole.body)


PROTOBUF_ACCEPT = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
)


@dataclasses.dataclass
class _Answer:
    headers: dict[str, str]
    chunks: list[bytes]  # as sent, when chunked

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


def _raw_get(
    port: int, headers: dict[str, str], method: str = "GET", version: str = "1.1"
) -> _Answer:
    """/metrics (OpenMetrics unless `headers` asks otherwise), read off the socket: the
    chunks as the server sent them."""
    asked = {"Accept": "application/openmetrics-text; version=1.0.0", **headers}
    lines = [
        f"{method} /metrics HTTP/{version}",
        "Host: 127.0.0.1",
        "Connection: close",
        *(f"{name}: {value}" for name, value in asked.items()),
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = connection.makefile("rb")
        assert answer.readline().split(b" ")[1] == b"200"
        found: dict[str, str] = {}
        while (line := answer.readline().decode("latin-1").strip()) != "":
            name, _, value = line.partition(":")
            found[name.lower()] = value.strip()
        if method == "HEAD":
            assert answer.read() == b""
            return _Answer(found, [])
        if found.get("transfer-encoding") != "chunked":
            return _Answer(found, [answer.read(int(found["content-length"]))])
        chunks = []
        while size := int(answer.readline().strip(), 16):
            chunks.append(answer.read(size))
            assert answer.readline() == b"\r\n"
        return _Answer(found, chunks)


def _series(body: bytes) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    families = text_string_to_metric_families(body.decode())  # type: ignore[no-untyped-call]
    return {
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in families
        for sample in family.samples
    }


def test_scrapes_stay_consistent_under_concurrent_writes(
    store: ActionSchedulerStore,
    mariadb: Server,
    database: str,
    site: Callable[..., SiteConfig],
    exporter_http: StartExporter,
) -> None:
    # The totals are compared with the truth right after the writers stop: read them in
    # every scrape rather than in the background.
    running = exporter_http(site(heavy_interval=0))
    stop = threading.Event()
    writers_done: list[int] = []

    def write_queue() -> None:
        writer = ActionSchedulerStore(mariadb.connect(database), "wp_")
        batches = 0
        while not stop.is_set():
            for index in range(10):
                writer.create("woocommerce_deliver_webhook_async", args=[index])
            writer.run_batch(8, outcome=lambda hook: None)
            batches += 1
        writers_done.append(batches)
        writer.connection.close()

    threads = [threading.Thread(target=write_queue) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(20):
            status, _, body = running.get("/metrics")
            assert status == 200
            assert samples(body, "actionscheduler_up") == {(("site", "shop"),): 1.0}
            by_status = samples(body, "actionscheduler_actions")
            assert all(value >= 0 for value in by_status.values())
            success = samples(body, "actionscheduler_exporter_collector_success")
            assert set(success.values()) == {1.0}, success
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert all(batches > 0 for batches in writers_done)

    # Once the writers stop, a scrape agrees with the ground truth exactly.
    truth = compute(store.connection)
    body = running.get("/metrics")[2]
    by_status = samples(body, "actionscheduler_actions")
    for name, count in truth.statuses.items():
        assert by_status[(("site", "shop"), ("status", name))] == count


def test_concurrent_scrapes_share_one_round(
    store: ActionSchedulerStore,
    mariadb: Server,
    database: str,
    site: Callable[..., SiteConfig],
    exporter_http: StartExporter,
) -> None:
    """50 scrapes that arrive while a round runs join it instead of starting their own:
    the statements are counted at a proxy in front of the database (what this exporter
    sends, whatever else uses the server), and the round is held on a table lock until
    every scrape has joined it, so a loaded machine cannot spread them over rounds."""
    for index in range(200):
        store.create("woocommerce_deliver_webhook_async", args=[index])
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0)
    # The split at every round, so that every round sends the same statements.
    config = site(host="127.0.0.1", port=proxy.port, query_timeout=60.0, due_split_interval=0)
    running = exporter_http(config)
    locker = mariadb.connect(database)
    try:
        running.get("/metrics")  # connect, warm up, and the first heavy refresh
        before = proxy.queries
        running.get("/metrics")
        one_round = proxy.queries - before

        with ThreadPoolExecutor(max_workers=50) as pool:
            with tables_locked(locker, ["wp_actionscheduler_claims"]):
                before, joined = proxy.queries, running.coordinator.joins()
                scrapes = [pool.submit(lambda: running.get("/metrics")[0]) for _ in range(50)]
                assert wait_until(lambda: running.coordinator.joins() == joined + 50, 60)
            statuses = [scrape.result(60) for scrape in scrapes]
        many = proxy.queries - before
    finally:
        locker.close()
        proxy.close()
    assert statuses == [200] * 50
    assert one_round >= 1  # the round's one statement (and the split of the due backlog)
    assert many == one_round, (many, one_round)  # the held round, and no other


def test_scrapes_with_a_tiny_timeout_do_not_starve_the_others(
    store: ActionSchedulerStore,
    mariadb: Server,
    site: Callable[..., SiteConfig],
    exporter_http: StartExporter,
) -> None:
    """A client that scrapes every 20 ms with a timeout of a millisecond gets what is read
    by then; the rounds it starts still run in full for the normal scrapes that join."""
    store.create("woocommerce_deliver_webhook_async")
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0.01)  # a round takes a while
    running = exporter_http(site(host="127.0.0.1", port=proxy.port))
    tiny = {"X-Prometheus-Scrape-Timeout-Seconds": "0.001"}
    stop = threading.Event()
    tiny_statuses: list[int] = []

    def hammer() -> None:
        while not stop.is_set():
            tiny_statuses.append(running.get("/metrics", tiny)[0])
            stop.wait(0.02)

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        assert wait_until(lambda: len(tiny_statuses) >= 3, 30)
        normal = [running.get("/metrics")[2] for _ in range(5)]
    finally:
        stop.set()
        thread.join()
        proxy.close()
    assert set(tiny_statuses) == {200}
    for body in normal:
        success = samples(body, "actionscheduler_exporter_collector_success")
        hot = {"due", "in_progress", "claims", "tables", "log_events"}
        assert {
            dict(labels)["collector"] for labels, value in success.items() if value == 1
        } >= hot, success
        assert samples(body, "actionscheduler_up") == {(("site", "shop"),): 1.0}
        assert (
            samples(body, "actionscheduler_due_actions")[(("claim", "unclaimed"), ("site", "shop"))]
            == 1.0
        )


def test_the_landing_page_lists_a_networks_subsites_once_found(
    store_factory: Callable[[str], ActionSchedulerStore],
    exporter_http: StartExporter,
    site: Callable[..., SiteConfig],
) -> None:
    """A `table_prefix: auto` entry is shown as its subsites, not as one row "auto"."""
    store_factory("wp_")
    store_factory("wp_2_")
    running = exporter_http(site(name="net", table_prefix="auto"))
    before = running.get("/")[2]
    assert "<td>net</td><td>auto</td>" in before  # no round has listed the subsites yet
    assert running.get("/metrics")[0] == 200
    page = running.get("/")[2]
    assert "<td>net:wp_</td><td>wp_</td>" in page
    assert "<td>net:wp_2_</td><td>wp_2_</td>" in page
    assert "<td>net</td><td>auto</td>" not in page
