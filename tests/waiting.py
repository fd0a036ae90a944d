"""Polling for a condition that another process or thread brings about."""

from __future__ import annotations

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
