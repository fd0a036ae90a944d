"""What the connection guard (guarded_http.py) builds on, checked before it is imported.

The guard subclasses uvicorn's `HttpToolsProtocol` (httptools' parser) and drives
CPython's `asyncio.sslproto` itself: neither is a public API. pyproject.toml bounds the
versions that are tested (`make test` runs the HTTP tests at both ends of each range); a
version outside them, or a Python that changed its TLS layer, fails here at start with a
sentence that says what is missing, instead of a traceback at the first connection.
"""

from __future__ import annotations

import importlib
import inspect

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 256

# The methods of HttpToolsProtocol the guard overrides or calls.
_PROTOCOL_METHODS = ("connection_made", "connection_lost", "data_received",
                     "on_message_begin", "on_headers_complete",
                     "on_response_complete")  # fmt: skip
# The arguments the guard gives asyncio's SSLProtocol.
_SSLPROTO_ARGUMENTS = ("loop", "app_protocol", "sslcontext", "waiter", "server_side",
                       "ssl_handshake_timeout")  # fmt: skip


def problem() -> str | None:
    """None when everything the guard needs is there; else what is missing, as a
    sentence to print."""
    hint = (
        "install the versions pyproject.toml declares "
        "(pip install -c constraints.txt actionscheduler-exporter)"
    )
    try:
        module = importlib.import_module("uvicorn.protocols.http.httptools_impl")
    except ImportError as error:
        return f"uvicorn's HTTP/1.1 protocol cannot be imported ({error}): {hint}"
    protocol = getattr(module, "HttpToolsProtocol", None)
    if protocol is None:
        return f"uvicorn has no HttpToolsProtocol in uvicorn.protocols.http.httptools_impl: {hint}"
    missing = [name for name in _PROTOCOL_METHODS if not callable(getattr(protocol, name, None))]
    if missing:
        return (
            f"uvicorn's HttpToolsProtocol lacks {', '.join(missing)}, which the guard uses: {hint}"
        )
    server = getattr(importlib.import_module("uvicorn"), "Server", None)
    if server is None or "sockets" not in inspect.signature(server.run).parameters:
        return f"uvicorn's Server.run takes no sockets, which the exporter listens on: {hint}"
    sslproto = importlib.import_module("asyncio.sslproto")
    ssl_protocol = getattr(sslproto, "SSLProtocol", None)
    if ssl_protocol is None:
        return "this Python's asyncio.sslproto has no SSLProtocol, which serves TLS here"
    parameters = inspect.signature(ssl_protocol).parameters
    absent = [name for name in _SSLPROTO_ARGUMENTS if name not in parameters]
    if absent:
        return (
            "this Python's asyncio.sslproto.SSLProtocol takes no "
            f"{', '.join(absent)}, which serving TLS here needs"
        )
    return None
