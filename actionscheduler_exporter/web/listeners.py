"""The sockets the server listens on: one or more addresses bound here, or those systemd
passes (socket activation), as exporter-toolkit's --web.listen-address and
--web.systemd-socket give them."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping

# sd_listen_fds(3): the passed sockets start at file descriptor 3.
SD_LISTEN_FDS_START = 3
BACKLOG = 2048  # uvicorn's default


class ListenError(ValueError):
    """Why the server cannot listen, as a sentence."""


def bind(addresses: list[tuple[str, int]]) -> list[socket.socket]:
    """Listening sockets for every address; a host of "" listens on every interface
    (IPv4 and IPv6, one socket each, as asyncio does it)."""
    sockets: list[socket.socket] = []
    try:
        for host, port in addresses:
            sockets.extend(_bind_one(host, port))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _bind_one(host: str, port: int) -> list[socket.socket]:
    where = f"{host or '*'}:{port}" if ":" not in host else f"[{host}]:{port}"
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        raise ListenError(f"cannot listen on {where}: {error.strerror}") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    for family, kind, proto, _, address in infos:
        if (family, address) in seen:
            continue
        seen.add((family, address))
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # The IPv4 socket of the same address serves IPv4.
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
        except OSError as error:
            sock.close()
            for other in sockets:
                other.close()
            raise ListenError(f"cannot listen on {where}: {error.strerror}") from None
        sock.setblocking(False)
        sockets.append(sock)
    return sockets


def systemd_sockets(environ: Mapping[str, str] | None = None) -> list[socket.socket]:
    """The listening sockets systemd passed this process (LISTEN_PID is ours,
    LISTEN_FDS of them from fd 3 on). The variables are removed from the environment
    afterwards, as sd_listen_fds(3) does when asked to, so that no child takes them."""
    env = os.environ if environ is None else environ
    pid, count = env.get("LISTEN_PID", ""), env.get("LISTEN_FDS", "")
    if not pid or not count:
        raise ListenError(
            "--web.systemd-socket: no sockets were passed (LISTEN_PID and LISTEN_FDS are "
            "not set): start the exporter from a systemd .socket unit"
        )
    if pid != str(os.getpid()):
        raise ListenError(
            f"--web.systemd-socket: the sockets were passed to process {pid}, not to this one"
        )
    if not count.isdigit() or int(count) < 1:
        raise ListenError(f"--web.systemd-socket: LISTEN_FDS must be a number above 0, got {count}")
    sockets: list[socket.socket] = []
    for fd in range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + int(count)):
        try:
            sock = socket.socket(fileno=fd)
        except OSError as error:
            raise ListenError(
                f"--web.systemd-socket: file descriptor {fd} is not a socket ({error.strerror})"
            ) from None
        if sock.type != socket.SOCK_STREAM or not sock.getsockopt(
            socket.SOL_SOCKET, socket.SO_ACCEPTCONN
        ):
            sock.detach()
            raise ListenError(
                f"--web.systemd-socket: file descriptor {fd} is not a listening stream "
                "socket (ListenStream= in the .socket unit)"
            )
        sock.setblocking(False)
        sockets.append(sock)
    if environ is None:
        for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
            with contextlib.suppress(KeyError):
                del os.environ[name]
    return sockets


def describe(sockets: list[socket.socket]) -> str:
    """host:port of each socket, for the start's log line."""
    names = []
    for sock in sockets:
        address = sock.getsockname()
        if isinstance(address, tuple):
            host = address[0]
            names.append(f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}")
        else:
            names.append(str(address))
    return ",".join(names)
