"""The MySQL 8 tier: every test below runs against a private MariaDB started with the
defaults of MySQL 8 that differ from MariaDB's and matter to the exporter's statements
(managed WooCommerce databases are often MySQL 8: RDS, Aurora, Cloud SQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.mariadb import Server, start_private, temporary

MYSQL8_SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)
MYSQL8_ARGUMENTS = [f"--sql-mode={MYSQL8_SQL_MODE}", "--group-concat-max-len=1024"]


def start_like_mysql8(workdir: Path) -> Server:
    return start_private(workdir, extra_arguments=MYSQL8_ARGUMENTS)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[Server]:
    """Overrides the shared server for this folder."""
    with temporary(start_like_mysql8) as server:
        yield server
