"""The error every layer raises when a reading fails: the lowest module of the exporter.

The database (QueryError), the Kubernetes client, the totals and the sources all raise it
or a subclass, and the round counts it by `kind` in one place.
"""

from __future__ import annotations


class SourceError(Exception):
    """A failed reading: `kind` is counted by the source's error counter, `message` is safe
    to log (no secrets)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
