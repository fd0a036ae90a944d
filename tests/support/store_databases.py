"""Stores a database each on one server, read by a user of the test's own (so that the
exporter's connections and statements can be told from other clients')."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from actionscheduler_exporter.config import SiteConfig
from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore


@contextlib.contextmanager
def store_databases(
    mariadb: Server, names: list[str], user: str, password: str, due: Callable[[int], int]
) -> Iterator[list[str]]:
    """The databases `names`, each with Action Scheduler's tables and `due(index)` due
    actions, readable by `user`; dropped with the user afterwards."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        for index, database in enumerate(names):
            cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
            cursor.execute(f"CREATE DATABASE `{database}`")
            cursor.execute(f"GRANT SELECT ON `{database}`.* TO '{user}'@'%'")
            store = ActionSchedulerStore(mariadb.connect(database))
            store.create_tables()
            for number in range(due(index)):
                store.create("woocommerce_deliver_webhook_async", args=[number])
            store.connection.close()
    try:
        yield names
    finally:
        with mariadb.connect() as connection, connection.cursor() as cursor:
            for database in names:
                cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
            cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def store_site(
    mariadb: Server, database: str, user: str, password: str, **overrides: Any
) -> SiteConfig:
    """A site reading `database` on the test's server as `user` (`overrides`: any other
    of its settings)."""
    fields: dict[str, Any] = {
        "name": database,
        "host": mariadb.host,
        "port": mariadb.port,
        "user": user,
        "password": password,
        "database": database,
    }
    return SiteConfig(**(fields | overrides))
