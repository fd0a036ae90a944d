"""Whether the exporter's database user could write, from SHOW GRANTS.

The exporter never writes, and its session is read-only anyway; a user that may write is
still a risk worth a warning (a leaked exporter password would open the shop's data).
"""

from __future__ import annotations

import functools
import re

_GRANT = re.compile(r"^GRANT (?P<privileges>.+?) ON (?P<target>\S+) TO ", re.IGNORECASE)
_WRITES = {
    "ALL",
    "ALL PRIVILEGES",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "INDEX",
    "TRIGGER",
    "DELETE HISTORY",
    "CREATE VIEW",
    "REFERENCES",
}


def can_write(grants: list[str], database: str) -> bool:
    """True when a grant gives a writing privilege on every database or on this one."""
    return _can_write(tuple(grants), database)


# Asked each time a site borrows a connection (a thousand sites' round: a thousand times).
@functools.lru_cache(maxsize=4096)
def _can_write(grants: tuple[str, ...], database: str) -> bool:
    for grant in grants:
        match = _GRANT.match(grant)
        if not match:
            continue  # roles and proxies
        privileges = {
            re.sub(r"\s*\(.*?\)", "", p).strip().upper()
            for p in match.group("privileges").split(",")
        }
        if privileges & _WRITES and _covers(match.group("target"), database):
            return True
    return False


def _covers(target: str, database: str) -> bool:
    scope = target.split(".", 1)[0].strip("`")
    if scope == "*":
        return True
    # A database name in a grant may be a LIKE pattern (wp\_% ...).
    pattern = "".join(
        ".*" if char == "%" else "." if char == "_" else re.escape(char)
        for char in scope.replace("\\_", "\0")
    ).replace("\0", "_")
    return re.fullmatch(pattern, database) is not None
