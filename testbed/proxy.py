"""A TCP proxy on loopback that delays every chunk it forwards: a slow database, made
from a fast one, for tests of timeouts and of scrapes that share a round."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class SlowProxy:
    def __init__(self, target_host: str, target_port: int, delay: float) -> None:
        self.target = (target_host, target_port)
        self.delay = delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="slow-proxy").start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            for source, destination in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, destination), daemon=True).start()

    def _pump(self, source: socket.socket, destination: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                time.sleep(self.delay)
                destination.sendall(chunk)
        for end in (source, destination):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
