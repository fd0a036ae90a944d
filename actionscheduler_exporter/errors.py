"""The error every layer raises when a reading fails: the lowest module of the exporter.

The database (QueryError), the Kubernetes client, the totals and the sources all raise it
or a subclass, and the round counts it by `kind` in one place.
"""

from __future__ import annotations

import traceback
from pathlib import Path


class SourceError(Exception):
    """A failed reading: `kind` is counted by the source's error counter, `message` is safe
    to log (no secrets)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def unexpected(error: BaseException) -> str:
    """An unexpected exception as its type and the line that raised it, without its
    message, which may quote the data that broke it (the exporter never logs a row)."""
    frames = traceback.extract_tb(error.__traceback__)
    place = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(error).__name__}{place}"
