"""A TCP proxy on loopback that delays every chunk it forwards: a slow database, made
from a fast one, for tests of timeouts and of scrapes that share a round.

It also counts the statements (COM_QUERY packets) that clients send through it, so a test
counts what the exporter itself sent, whatever other clients do on the same server. The
count holds for plain connections (a TLS session cannot be read).
"""

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
        self._count_lock = threading.Lock()
        self.queries = 0
        self.bytes_to_client = 0
        threading.Thread(target=self._accept, daemon=True, name="slow-proxy").start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closed.is_set():  # accepted while closing: the server is gone
                client.close()
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            for source, destination, count in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pump, args=(source, destination, count), daemon=True
                ).start()

    def _pump(self, source: socket.socket, destination: socket.socket, count: bool) -> None:
        packets = _CommandCounter() if count else None
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                with self._count_lock:
                    if packets is not None:
                        self.queries += packets.feed(chunk)
                    else:
                        self.bytes_to_client += len(chunk)
                time.sleep(self.delay)
                destination.sendall(chunk)
        for end in (source, destination):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stops accepting and ends every open connection, as a server that went away."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                # shutdown wakes the pump blocked in recv(); close alone would not.
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class _CommandCounter:
    """Reads the client's side of the MySQL protocol: 3-byte length, sequence number,
    payload. A command starts a sequence (number 0); COM_QUERY is command 0x03."""

    _COM_QUERY = 0x03

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> int:
        self._buffer += chunk
        queries = 0
        while len(self._buffer) >= 4:
            length = int.from_bytes(self._buffer[:3], "little")
            if len(self._buffer) < 4 + length:
                break
            sequence, payload = self._buffer[3], self._buffer[4 : 4 + length]
            if sequence == 0 and payload[:1] == bytes([self._COM_QUERY]):
                queries += 1
            self._buffer = self._buffer[4 + length :]
        return queries
