"""One TLS context per distinct TLS setting, shared by every connection that uses it.

PyMySQL builds an `ssl.SSLContext` for each connection, also for the opportunistic TLS it
tries when no TLS is configured; each loads the system's CA store, close to a megabyte of
native memory. An exporter of hundreds of sites would hold hundreds of identical ones, so
connections are made by a subclass that builds each distinct context once.
"""

from __future__ import annotations

import ssl
import threading
from typing import TYPE_CHECKING, Any

import pymysql.connections

_contexts: dict[tuple[tuple[str, str], ...], ssl.SSLContext] = {}
_lock = threading.Lock()


if TYPE_CHECKING:
    _Connection = pymysql.connections.Connection[Any]
else:  # generic in the type stubs only
    _Connection = pymysql.connections.Connection


class SharedContextConnection(_Connection):
    """A PyMySQL connection whose TLS context comes from the shared cache."""

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        if isinstance(sslp, ssl.SSLContext):
            return sslp
        key = tuple(sorted((str(name), repr(value)) for name, value in dict(sslp).items()))
        with _lock:
            context = _contexts.get(key)
            if context is None:
                # PyMySQL's own construction (not in its type stubs), once per setting.
                context = _contexts[key] = super()._create_ssl_ctx(sslp)  # type: ignore[misc]
            return context


def shared_contexts() -> int:
    """How many distinct contexts exist (for tests and the many-sites benchmark)."""
    with _lock:
        return len(_contexts)
