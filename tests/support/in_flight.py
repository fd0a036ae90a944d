"""Calls running at once in this process: how many now, and the most ever.

What the code under test runs itself, never a server-wide count (another test run may be
busy on the same server)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class InFlight:
    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def counted(self) -> Iterator[None]:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            yield
        finally:
            with self._lock:
                self.now -= 1
