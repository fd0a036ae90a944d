"""One HTTPS GET with a single deadline for the whole call and a bounded body.

A socket timeout bounds each read only: an API (or a proxy) that drips a byte a second
would hold a call, and the background refresh behind it, for ever. Here a timer shuts the
socket down when the call's time is up, whatever it is waiting for (the TCP connect, the
TLS handshake, the headers, the body). The body is read in chunks and refused past
`MAX_BODY_BYTES`, so a huge answer costs at most that much memory.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from dataclasses import dataclass

from actionscheduler_exporter.kubernetes.errors import KubernetesError
from actionscheduler_exporter.kubernetes.redact import sanitize

# A list of some 400 to 800 pods with their managed fields; parsed, about six times as
# much memory (25 MB), well inside the chart's 160Mi limit.
MAX_BODY_BYTES = 4 * 1024 * 1024
# Of an error answer only its Status message is used.
ERROR_BODY_BYTES = 64 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    body: bytes


class _Deadline:
    """Shuts the watched socket down once `seconds` have passed, unless ended before."""

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._ended = False
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._socket = sock
            if self.expired:
                _shutdown(sock)

    def end(self) -> None:
        """Before the socket is closed: its descriptor must not be shut once reused."""
        with self._lock:
            self._ended = True
        self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            if self._ended:
                return
            self.expired = True
            if self._socket is not None:
                _shutdown(self._socket)


def _shutdown(sock: socket.socket) -> None:
    # The plain socket's shutdown, also for an SSLSocket: its own would drop the TLS
    # state under the thread reading it. A blocked read then returns at once.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def fetch(
    host: str,
    port: int,
    context: ssl.SSLContext,
    target: str,
    headers: dict[str, str],
    timeout: float,
    max_body: int = MAX_BODY_BYTES,
) -> Answer:
    """GET `target`; the whole call ends within `timeout` seconds. Raises KubernetesError:
    `timeout`, `connect`, or `http` (not HTTP, or a body larger than `max_body`)."""
    deadline = _Deadline(timeout)
    owned: socket.socket | None = None
    connection: http.client.HTTPConnection | None = None
    try:
        try:
            owned = socket.create_connection((host, port), timeout=timeout)
            deadline.watch(owned)
            # No handshake in wrap_socket: a failed one would close the descriptor there,
            # before the deadline is ended.
            owned = context.wrap_socket(owned, server_hostname=host, do_handshake_on_connect=False)
            deadline.watch(owned)
            owned.do_handshake()
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
            connection.default_port = 443  # the Host header as HTTPS writes it
            connection.sock = owned
            connection.request("GET", target, headers={**headers, "Connection": "close"})
            response = connection.getresponse()
            answer = _read(response, max_body)
        except KubernetesError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as error:
            if deadline.expired or isinstance(error, TimeoutError):
                raise _timed_out(timeout) from None
            raise _failed(error) from None
        if deadline.expired:
            # A body that ends at the connection's end looks complete when cut short.
            raise _timed_out(timeout)
        return answer
    finally:
        deadline.end()
        if connection is not None:
            connection.close()
        elif owned is not None:
            owned.close()


def _read(response: http.client.HTTPResponse, max_body: int) -> Answer:
    ok = response.status == 200
    limit = max_body if ok else ERROR_BODY_BYTES
    declared = response.getheader("Content-Length", "")
    if ok and declared.strip().isdigit() and int(declared) > max_body:
        raise _too_large(max_body, f"declares {int(declared):,} bytes")
    body = bytearray()
    while True:
        chunk = response.read(min(_CHUNK, limit + 1 - len(body)))
        if not chunk:
            break
        body += chunk
        if len(body) > limit:
            if ok:
                raise _too_large(max_body, "is longer")
            del body[limit:]  # the start of an error text is enough
            break
    return Answer(response.status, response.reason or "", bytes(body))


def _too_large(max_body: int, how: str) -> KubernetesError:
    return KubernetesError(
        "http", f"the answer {how} than the {max_body:,} bytes the exporter reads; not read"
    )


def _timed_out(timeout: float) -> KubernetesError:
    return KubernetesError("timeout", f"no complete answer within {timeout:g}s")


def _failed(error: Exception) -> KubernetesError:
    if isinstance(error, (http.client.RemoteDisconnected, http.client.IncompleteRead)):
        return KubernetesError("connect", "the API closed the connection before answering")
    if isinstance(error, (http.client.HTTPException, ValueError)):
        # BadStatusLine and the like quote what the server sent.
        return KubernetesError(
            "http", f"not an HTTP answer ({type(error).__name__}: {sanitize(str(error))})"
        )
    return KubernetesError("connect", sanitize(str(error)) or type(error).__name__)
