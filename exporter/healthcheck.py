"""`actionscheduler-exporter healthcheck`: is the exporter on this host answering?

For a container's HEALTHCHECK, which cannot see the server's command line: the address
comes from --listen-address or AS_EXPORTER_LISTEN_ADDRESS, as the server's does. The
exporter may serve TLS (a web config) with a certificate for its public name: the check
then speaks TLS to loopback without verifying it, which tells only that the process answers.
"""

from __future__ import annotations

import http.client
import ssl

_TIMEOUT = 4.0


def healthy(host: str, port: int) -> bool:
    """True when GET /healthz answers 200, over plain HTTP or TLS."""
    target = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host  # noqa: S104 - a bind-all address
    for connection in (
        http.client.HTTPConnection(target, port, timeout=_TIMEOUT),
        http.client.HTTPSConnection(target, port, timeout=_TIMEOUT, context=_unverified()),
    ):
        try:
            connection.request("GET", "/healthz")
            return connection.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            continue
        finally:
            connection.close()
    return False


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
