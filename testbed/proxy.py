"""A TCP proxy on loopback that delays every chunk it forwards: a slow database, made
from a fast one, for tests of timeouts and of scrapes that share a round.

It also counts the commands that clients send through it (statements are COM_QUERY
packets, a switch of database COM_INIT_DB), so a test counts what the exporter itself
sent, whatever other clients do on the same server. The count holds for plain
connections (a TLS session cannot be read).

It can also drop connections as the network does: every open one at once (a failover, a
restarted proxy), or those idle for `idle_close` seconds (a load balancer's idle timeout,
ProxySQL, a short `wait_timeout`), without a word to either side.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import Counter


class SlowProxy:
    def __init__(
        self,
        target_host: str,
        target_port: int,
        delay: float,
        *,
        idle_close: float | None = None,
    ) -> None:
        self.target = (target_host, target_port)
        self.delay = delay
        self.idle_close = idle_close
        self.dropped = 0  # connections dropped (idle, or by drop_connections)
        self.accepted = 0  # connections made through the proxy so far
        self._last_traffic: dict[int, float] = {}  # by the client socket's fileno
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._count_lock = threading.Lock()
        self._commands: Counter[int] = Counter()  # by command byte (COM_QUERY, ...)
        self.bytes_to_client = 0
        threading.Thread(target=self._accept, daemon=True, name="slow-proxy").start()
        if idle_close is not None:
            threading.Thread(target=self._reap_idle, daemon=True, name="proxy-idle").start()

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
            with self._count_lock:
                self.accepted += 1
                self._sockets += [client, server]
                self._pairs.append((client, server))
                self._last_traffic[id(client)] = time.monotonic()
            for source, destination, count in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pump, args=(source, destination, count, client), daemon=True
                ).start()

    def _pump(
        self,
        source: socket.socket,
        destination: socket.socket,
        count: bool,
        client: socket.socket,
    ) -> None:
        packets = _CommandCounter() if count else None
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                with self._count_lock:
                    self._last_traffic[id(client)] = time.monotonic()
                    if packets is not None:
                        self._commands.update(packets.feed(chunk))
                    else:
                        self.bytes_to_client += len(chunk)
                time.sleep(self.delay)
                destination.sendall(chunk)
        for end in (source, destination):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    @property
    def queries(self) -> int:
        """Statements sent so far (COM_QUERY)."""
        return self.sent(COM_QUERY)

    def sent(self, command: int) -> int:
        """How many of one command the clients have sent so far."""
        with self._count_lock:
            return self._commands[command]

    @property
    def open_connections(self) -> int:
        with self._count_lock:
            return len(self._pairs)

    def drop_connections(self) -> int:
        """Ends every open connection, and goes on accepting new ones: what a failover or
        a restarted proxy does to a client's pooled connections. Returns how many."""
        with self._count_lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            self._drop(pair)
        return len(pairs)

    def _reap_idle(self) -> None:
        while not self._closed.wait(0.05):
            if self.idle_close is None:  # turned off
                continue
            now = time.monotonic()
            with self._count_lock:
                idle = [
                    pair
                    for pair in self._pairs
                    if now - self._last_traffic.get(id(pair[0]), now) > self.idle_close
                ]
                self._pairs = [pair for pair in self._pairs if pair not in idle]
            for pair in idle:
                self._drop(pair)

    def _drop(self, pair: tuple[socket.socket, socket.socket]) -> None:
        for sock in pair:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._count_lock:
            self.dropped += 1

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


COM_INIT_DB = 0x02
COM_QUERY = 0x03


class _CommandCounter:
    """Reads the client's side of the MySQL protocol: 3-byte length, sequence number,
    payload. A command starts a sequence (number 0), its first byte says which."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[int]:
        self._buffer += chunk
        commands: list[int] = []
        while len(self._buffer) >= 4:
            length = int.from_bytes(self._buffer[:3], "little")
            if len(self._buffer) < 4 + length:
                break
            sequence, payload = self._buffer[3], self._buffer[4 : 4 + length]
            if sequence == 0 and payload:
                commands.append(payload[0])
            self._buffer = self._buffer[4 + length :]
        return commands
