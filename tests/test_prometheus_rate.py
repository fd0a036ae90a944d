"""A real Prometheus scraping the exporter: rate() of the completion counter matches the
rate at which the writer really completes actions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore
from tests.support.http_server import RunningExporter
from tests.support.prometheus import Prometheus
from tests.support.waiting import wait_until

WRITER_RATE = 10.0  # completions per second
WINDOW = 15  # seconds of steady writing that the rate is computed over


def test_rate_of_completions_matches_the_writer(
    store: ActionSchedulerStore,
    mariadb: Server,
    database: str,
    exporter_http: Callable[..., RunningExporter],
) -> None:
    running = exporter_http()
    prometheus = Prometheus([f"127.0.0.1:{running.port}"])
    stop = threading.Event()
    completions: list[float] = []

    def writer() -> None:
        own = ActionSchedulerStore(mariadb.connect(database))
        started = time.monotonic()
        count = 0
        while not stop.is_set():
            action = own.create("woocommerce_deliver_webhook_async", args=[count])
            own.run_action(action)
            completions.append(time.time())
            count += 1
            # Paced on a fixed schedule, so the rate is known whatever each write costs.
            delay = started + count / WRITER_RATE - time.monotonic()
            if delay > 0:
                stop.wait(delay)
        own.connection.close()

    try:
        prometheus.wait_for("actionscheduler_up == 1")
        thread = threading.Thread(target=writer)
        thread.start()
        # A window's worth of writes, and a few seconds for the last scrapes.
        assert wait_until(
            lambda: bool(completions) and completions[-1] - completions[0] >= WINDOW + 6,
            4 * WINDOW,
        )
        stop.set()
        thread.join()
        end = completions[-1] - 2
        begin = end - WINDOW
        known = sum(1 for moment in completions if begin < moment <= end) / WINDOW
        result = prometheus.query(
            f"sum(increase(actionscheduler_actions_completed_total[{WINDOW}s]))", at=end
        )
        measured = float(result[0]["value"][1]) / WINDOW
    finally:
        prometheus.stop()
    assert abs(known - WRITER_RATE) / WRITER_RATE < 0.1, known
    assert abs(measured - known) / known < 0.1, (measured, known)
