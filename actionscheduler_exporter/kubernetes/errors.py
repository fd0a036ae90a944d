"""The failure of a Kubernetes API reading."""

from __future__ import annotations

from actionscheduler_exporter.errors import SourceError


class KubernetesError(SourceError):
    """A failed call, with a kind for the error counter and a message that says what to do."""
