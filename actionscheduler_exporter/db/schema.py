"""Action Scheduler's schema, as its source defines it, and the helpers to read it safely.

Below every reader of the tables (the collectors, the heavy totals, the log events collector): the
four tables and their names for a prefix, the statuses Action Scheduler writes, the date
before which a date is junk, and how values read from the tables become label texts and
ages. No statement is sent from here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

TABLES: tuple[str, ...] = ("actions", "claims", "groups", "logs")
STATUSES: tuple[str, ...] = ("pending", "in-progress", "complete", "failed", "canceled")
TABLE_INFIX = "actionscheduler_"
ACTIONS_SUFFIX = TABLE_INFIX + "actions"
# Dates before this are Action Scheduler's zero date or other junk that would turn into
# ages of centuries; Action Scheduler did not exist before it.
VALID_DATE_FLOOR = "2000-01-01 00:00:00"
# Ids per IN (...) list, to keep statements a reasonable size.
LOOKUP_CHUNK = 1000

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def is_safe_prefix(prefix: str) -> bool:
    """Table names go into SQL text (they cannot be bound parameters): only safe ones."""
    return bool(_SAFE_NAME.match(prefix + "x"))


# How statements name their tables' database: this mark, which the session replaces by
# the site's database just before sending (`in_database`), so that a pooled connection
# reads any database of its server without a switch (COM_INIT_DB, a round trip per site
# and round). The text of a statement stays the same for every database with the same
# table prefix: made, cached and packed once, not once per database.
DATABASE_MARK = "`<database>`"


class _SiteDatabase:
    def __repr__(self) -> str:
        return "SITE_DATABASE"


# A statement's argument that the session replaces by the site's database name.
SITE_DATABASE: Final = _SiteDatabase()


@dataclass(frozen=True)
class TableNames:
    """The four tables of a prefix, as statements name them (in `DATABASE_MARK`)."""

    prefix: str

    def __post_init__(self) -> None:
        if not is_safe_prefix(self.prefix):
            raise ValueError(f"unsafe table prefix {self.prefix!r}")

    def name(self, table: str) -> str:
        """The table's own name, as `information_schema.TABLES` lists it."""
        return f"{self.prefix}{TABLE_INFIX}{table}"

    @cached_property
    def actions(self) -> str:
        return self._in_statement("actions")

    @cached_property
    def claims(self) -> str:
        return self._in_statement("claims")

    @cached_property
    def groups(self) -> str:
        return self._in_statement("groups")

    @cached_property
    def logs(self) -> str:
        return self._in_statement("logs")

    def _in_statement(self, table: str) -> str:
        return f"{DATABASE_MARK}.{self.name(table)}"


@functools.lru_cache(maxsize=4096)
def table_names(prefix: str) -> TableNames:
    """A prefix's table names, made once: a round names the tables of every prefix it
    reads (a thousand stores' scrape made and checked a thousand of them, and each
    collector's statement then made their names again)."""
    return TableNames(prefix)


def in_database(
    sql: str, args: Sequence[object] | None, database: str
) -> tuple[str, Sequence[object] | None]:
    """The statement as sent for a site: its tables in the site's database (without a
    database, in the connection's own), `SITE_DATABASE` arguments its name."""
    sql = sql.replace(_MARK_DOT, _qualifier(database, formatted=args is not None))
    if args and SITE_DATABASE in args:
        args = tuple(database if arg is SITE_DATABASE else arg for arg in args)
    return sql, args


_MARK_DOT = f"{DATABASE_MARK}."


@functools.lru_cache(maxsize=4096)
def _qualifier(database: str, *, formatted: bool) -> str:
    """What the mark becomes for a database (made once per database, not per statement);
    `formatted`: the driver formats the text with arguments, where a % stays one."""
    qualifier = f"{quoted_identifier(database)}." if database else ""
    return qualifier.replace("%", "%%") if formatted else qualifier


def quoted_identifier(name: str) -> str:
    """A database name as SQL text: any character but NUL is allowed in one, a backtick
    written twice (MySQL's identifier quoting)."""
    if "\x00" in name:
        raise ValueError(f"a database name with a NUL character: {name!r}")
    return "`" + name.replace("`", "``") + "`"


# The `schedule` column is a PHP-serialized object: its class says whether the action
# recurs. Matched on the class name at the start, never unserialized.
RECURRING_SCHEDULES: tuple[str, ...] = (
    "ActionScheduler_IntervalSchedule",
    "ActionScheduler_CronSchedule",
)
SCHEDULE_HEAD_CHARACTERS = 64  # enough for `O:<length>:"<class name>"`
_RECURRING_HEADS = tuple(f'O:{len(name)}:"{name}"' for name in RECURRING_SCHEDULES)


def is_recurring(schedule_head: Any) -> bool:
    """True for the start of a serialized interval or cron schedule."""
    return label_value(schedule_head).startswith(_RECURRING_HEADS)


def schedule_head(column: str = "schedule") -> str:
    """The SQL expression reading the part of the schedule `is_recurring` needs."""
    return f"LEFT({column}, {SCHEDULE_HEAD_CHARACTERS})"


# Label texts shared by every site that has them: a thousand sites' hooks and groups are
# mostly the same few names, held between scrapes by the background sources. Bounded, and
# not sys.intern: on Python 3.12 interned strings are never freed, and hook names are data.
_SHARED_TEXTS: dict[str, str] = {}
MAX_SHARED_TEXTS = 20_000


def label_value(raw: Any) -> str:
    """Text for a label from whatever the database returned (bytes included)."""
    if raw is None:
        return ""
    if isinstance(raw, bytes | bytearray):
        text = bytes(raw).decode("utf-8", errors="replace")
    else:
        # Lone surrogates cannot be written as UTF-8: replace them rather than fail.
        text = str(raw).encode("utf-8", errors="replace").decode("utf-8")
    shared = _SHARED_TEXTS.get(text)
    if shared is not None:
        return shared
    if len(_SHARED_TEXTS) < MAX_SHARED_TEXTS:
        _SHARED_TEXTS[text] = text
    return text


def status_of(raw: Any) -> str:
    """A status as Action Scheduler's own queries see it: the column's collation ignores
    case and trailing spaces (PAD SPACE), so `status = 'pending'` takes 'PENDING' and
    'pending ' too, and GROUP BY may return either as the group's value."""
    return label_value(raw).rstrip(" ").lower()


def seconds(raw: Any) -> float:
    """An age column that may be NULL (no rows) or negative (a date in the future)."""
    if raw is None:
        return 0.0
    return max(0.0, float(raw))


def chunks(values: list[int]) -> Iterator[list[int]]:
    for index in range(0, len(values), LOOKUP_CHUNK):
        yield values[index : index + LOOKUP_CHUNK]


def placeholders(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))
