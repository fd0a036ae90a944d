"""Checks for single configuration values. Each raises ValueError with a readable problem."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from actionscheduler_exporter.metrics import catalog

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_TABLE_PREFIX = re.compile(r"^[A-Za-z0-9_]{0,64}$")
# Longer than anything the exporter waits for: a larger value is a mistake (or infinite).
MAX_DURATION = 30 * 86400.0
# Counts and limits go into SQL (LIMIT) and into memory: bounded like MySQL's int.
MAX_INT = 2**31 - 1
MAX_LOG_ROWS_PER_SCRAPE = 100_000
MIN_CHUNK_ROWS = 10
MAX_CHUNK_ROWS = 1_000_000
# A database server allows 151 connections by default; the shops need most of them.
MAX_CONNECTIONS_PER_SERVER = 64
# Processes reading the sites: each holds an interpreter (about 40 MiB).
MAX_PROCESSES = 8
# A purge shows in the totals within this many heavy refreshes at most.
MAX_SETTLED_CHECK_EVERY = 12
# Due actions split by group per scrape: a statement of a few hundred milliseconds at most.
MAX_DUE_SPLIT_ROWS = 100_000


def duration(value: object) -> float:
    """Seconds from a number or a string such as '500ms', '5s', '2m'."""
    if isinstance(value, bool):
        raise ValueError(f"must be a duration such as 5s or 2m, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        raise ValueError(f"must be a duration such as 5s or 2m, got {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"must be a positive duration, got {value!r}")
    if seconds > MAX_DURATION:
        raise ValueError(f"must be at most 30 days, got {value!r}")
    return seconds


def duration_or_zero(value: object) -> float:
    """A duration where zero ("0", "0s") is allowed: it turns something off."""
    zero = (isinstance(value, int | float) and not isinstance(value, bool) and value == 0) or (
        isinstance(value, str)
        and (match := _DURATION.match(value)) is not None
        and float(match.group(1)) == 0
    )
    return 0.0 if zero else duration(value)


def positive_int(value: object) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a whole number of at least 1, got {value!r}")
    if value > MAX_INT:
        raise ValueError(f"must be at most {MAX_INT}, got {value!r}")
    return value


def whole_number_up_to(limit: int) -> Callable[[object], int]:
    """A check for a whole number from 1 to `limit`."""

    def check(value: object) -> int:
        number = positive_int(value)
        if number > limit:
            raise ValueError(f"must be at most {limit}, got {value!r}")
        return number

    return check


# Log rows read in one scrape: each costs up to a few kilobytes of memory.
rows_per_scrape = whole_number_up_to(MAX_LOG_ROWS_PER_SCRAPE)
connections_per_server = whole_number_up_to(MAX_CONNECTIONS_PER_SERVER)
processes = whole_number_up_to(MAX_PROCESSES)
settled_check_every = whole_number_up_to(MAX_SETTLED_CHECK_EVERY)


def due_split_rows(value: object) -> int:
    """0 (no split) or a whole number of rows up to MAX_DUE_SPLIT_ROWS."""
    problem = f"must be a whole number from 0 (no split) to {MAX_DUE_SPLIT_ROWS}, got {value!r}"
    if isinstance(value, str) and value.strip().isdigit():  # a DSN parameter
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(problem)
    if not 0 <= value <= MAX_DUE_SPLIT_ROWS:
        raise ValueError(problem)
    return value


def chunk_rows(value: object) -> int:
    """Ids per statement of the heavy tier's walk: bounded so no statement grows long."""
    number = positive_int(value)
    if not MIN_CHUNK_ROWS <= number <= MAX_CHUNK_ROWS:
        raise ValueError(f"must be from {MIN_CHUNK_ROWS} to {MAX_CHUNK_ROWS}, got {value!r}")
    return number


def fallback(value: object) -> str:
    if value not in ("primary", "none"):
        raise ValueError(f"must be 'primary' or 'none', got {value!r}")
    return str(value)


def ratio(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ValueError(f"must be a number above 0 and at most 1, got {value!r}")
    return float(value)


def positive_number(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"must be a positive, finite number, got {value!r}")
    return float(value)


def port(value: object) -> int:
    number = positive_int(value)
    if number > 65535:
        raise ValueError(f"must be a TCP port from 1 to 65535, got {value!r}")
    return number


def text(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a non-empty string, got {value!r}")
    return value


def database_name(value: object) -> str:
    """A database's name: statements name it (quoted), and no name holds a NUL."""
    name = text(value)
    if "\x00" in name:
        raise ValueError(f"must not contain a NUL character, got {name!r}")
    return name


def boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "yes", "1", "on"}:
        return True
    if isinstance(value, str) and value.lower() in {"false", "no", "0", "off"}:
        return False
    raise ValueError(f"must be true or false, got {value!r}")


def table_prefix(value: object) -> str:
    if not isinstance(value, str) or not _TABLE_PREFIX.match(value):
        raise ValueError(
            "must be 'auto' or a table prefix of letters, digits and underscores "
            f"such as wp_, got {value!r}"
        )
    return value


def label_name(value: str) -> str:
    if not _LABEL_NAME.match(value) or value.startswith("__"):
        raise ValueError(f"{value!r} is not a valid Prometheus label name")
    if value in catalog.RESERVED_LABELS:
        raise ValueError(f"{value!r} is a label the exporter sets itself")
    return value


def listen_address(value: object) -> tuple[str, int]:
    """'host:port', ':port' (every interface) or '[v6]:port'."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string such as :9966 or 127.0.0.1:9966, got {value!r}")
    host, sep, port_text = value.rpartition(":")
    if not sep:
        raise ValueError(f"must look like :9966 or 127.0.0.1:9966, got {value!r}")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - ':port' means every interface
    return host, port(port_text)
