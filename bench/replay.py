"""The statements of one scrape, sent again without the exporter that sent them.

A thousand stores' scrape costs the database server more CPU than the floor does; this
says how much of that is the statements themselves (their shape: packed answers, batches,
what the floor does not read) and not the exporter's pace. The server's general log
records one scrape's statements per connection (`Init DB` and `Query`, in order); they are
then sent again on as many connections, each connection's in its order, alternated with
the floor, and the server's CPU is counted for each (docs/performance.md).

Only on the benchmark's own server (it sets the general log globally). What it does not
copy: statements a round sends after the scrape answered, the sessions' own settings
(`max_statement_time`, read-only) and the exporter's user (the replay is the server's
root); a connection's first database is the one given (a network's), later ones follow
its `Init DB`s.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pymysql

from bench.floor import ManyStoresFloor, side_by_side
from bench.measure import process_cpu_seconds
from testbed.mariadb import Server

ROUNDS = 10

# (command, argument): `Init DB` (a switch of database) or `Query`.
Command = tuple[str, str]


@dataclass
class Replayed:
    statements: int  # per scrape, of every connection
    connections: int
    wall_s: float  # median of the rounds
    server_cpu_s: float  # mean per round
    floor_wall_s: float
    floor_server_cpu_s: float

    def as_dict(self) -> dict[str, float | int]:
        return dict(vars(self))


def captured(server: Server, scrape: Callable[[], object], user: str) -> list[list[Command]]:
    """One scrape's commands from `user`'s connections, per connection, in order."""
    assert server.process is not None, "the general log is set globally: a private server"
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SET GLOBAL log_output = 'TABLE'")
        cursor.execute("TRUNCATE mysql.general_log")
        cursor.execute("SET GLOBAL general_log = 1")
        try:
            scrape()
        finally:
            cursor.execute("SET GLOBAL general_log = 0")
        cursor.execute(
            "SELECT thread_id, command_type, argument FROM mysql.general_log"
            " WHERE command_type IN ('Init DB', 'Query')"
            " AND SUBSTRING_INDEX(user_host, '[', 1) = %s ORDER BY event_time",
            (user,),
        )
        rows = cursor.fetchall()
        cursor.execute("TRUNCATE mysql.general_log")
    by_connection: dict[int, list[Command]] = {}
    for thread_id, command, argument in rows:
        text = bytes(argument).decode() if isinstance(argument, bytes | bytearray) else argument
        by_connection.setdefault(int(thread_id), []).append((str(command), str(text)))
    if not by_connection:
        raise RuntimeError(f"the general log recorded no statement of {user} in a scrape")
    return list(by_connection.values())


def replay_against_floor(
    server: Server,
    commands: list[list[Command]],
    floor: ManyStoresFloor,
    database: str | None = None,
) -> Replayed:
    """The captured commands and the floor, in turn, `ROUNDS` times each; `database`: the
    one the exporter's connections opened (a network's: its statements name no database)."""
    assert server.process is not None, "the server's CPU is counted: a private server"
    with connections_for(server, len(commands), database) as connections:
        walls, cpus = in_turn(
            server.process.pid,
            {"replay": lambda: send_all(connections, commands), "floor": floor.run},
            ROUNDS,
        )
    return Replayed(
        statements=statements_of(commands),
        connections=len(commands),
        wall_s=statistics.median(walls["replay"]),
        server_cpu_s=statistics.fmean(cpus["replay"]),
        floor_wall_s=statistics.median(walls["floor"]),
        floor_server_cpu_s=statistics.fmean(cpus["floor"]),
    )


def in_turn(
    pid: int, calls: Mapping[str, Callable[[], object]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each call once untimed (the tables open, the connections warm), then `rounds`
    times, the calls in turn, each first in every other round (none always meets another's
    wake): the wall and the server's CPU (process `pid`) of each call, by its name."""
    walls: dict[str, list[float]] = {name: [] for name in calls}
    cpus: dict[str, list[float]] = {name: [] for name in calls}
    for warm_up in calls.values():
        warm_up()
    order = list(calls.items())
    for index in range(rounds):
        for name, call in order if index % 2 == 0 else reversed(order):
            cpu = process_cpu_seconds(pid)
            started = time.perf_counter()
            call()
            walls[name].append(time.perf_counter() - started)
            cpus[name].append(process_cpu_seconds(pid) - cpu)
    return walls, cpus


def statements_of(commands: list[list[Command]]) -> int:
    """The statements (`Query`) of a capture, every connection's."""
    return sum(1 for sent in commands for command, _ in sent if command == "Query")


@contextlib.contextmanager
def connections_for(
    server: Server, count: int, database: str | None
) -> Iterator[list[pymysql.connections.Connection[Any]]]:
    connections = [server.connect(database) for _ in range(count)]
    try:
        yield connections
    finally:
        for connection in connections:
            with contextlib.suppress(pymysql.Error):
                connection.close()


def send_all(
    connections: list[pymysql.connections.Connection[Any]], commands: list[list[Command]]
) -> None:
    """Each connection's commands on a connection of its own, side by side."""

    def send(connection: pymysql.connections.Connection[Any], sent: list[Command]) -> None:
        with connection.cursor() as cursor:
            for command, argument in sent:
                if command == "Init DB":
                    connection.select_db(argument)
                else:
                    cursor.execute(argument)
                    cursor.fetchall()

    side_by_side(
        [functools.partial(send, c, sent) for c, sent in zip(connections, commands, strict=True)]
    )
