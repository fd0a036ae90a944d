"""Polling for a condition that another process or thread brings about."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """True as soon as the condition holds; its last answer when the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def port_open(port: int) -> bool:
    """Whether something accepts connections on the loopback port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def sampled(read: Callable[[], T]) -> Iterator[list[T]]:
    """Reads over and over in a thread while the block runs: every reading, for the test
    to look at afterwards (the most connections a server saw, say)."""
    readings: list[T] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            readings.append(read())

    thread = threading.Thread(target=poll, name="sampled")
    thread.start()
    try:
        yield readings
    finally:
        stop.set()
        thread.join()
