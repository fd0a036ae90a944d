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
    return not unhealthy(host, port)


def unhealthy(host: str, port: int) -> str:
    """Why GET /healthz did not answer 200 (over plain HTTP, nor TLS); empty when it did."""
    target = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host  # noqa: S104 - a bind-all address
    problems: list[str] = []
    for scheme, connection in (
        ("http", http.client.HTTPConnection(target, port, timeout=_TIMEOUT)),
        (
            "https",
            http.client.HTTPSConnection(target, port, timeout=_TIMEOUT, context=_unverified()),
        ),
    ):
        try:
            connection.request("GET", "/healthz")
            status = connection.getresponse().status
            if status == 200:
                return ""
            problems.append(f"{scheme}: /healthz answered {status}")
        except OSError as error:
            problems.append(f"{scheme}: {error.strerror or error}")
        except http.client.HTTPException as error:
            problems.append(f"{scheme}: {type(error).__name__}")
        finally:
            connection.close()
    return f"nothing healthy answers on {target}:{port} ({'; '.join(problems)})"


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
