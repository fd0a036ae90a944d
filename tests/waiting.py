"""Polling for a condition that another process or thread brings about."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable


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
