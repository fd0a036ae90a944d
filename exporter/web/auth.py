"""HTTP basic auth with bcrypt-hashed passwords, as exporter-toolkit does it.

bcrypt is slow on purpose; a verified user and password pair is remembered (as a SHA-256
digest, never in clear) so that a scrape every few seconds does not pay for it each time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import threading

import bcrypt

# Remembered verifications at the most, so that guessing cannot grow memory.
_CACHE_LIMIT = 64


class BasicAuth:
    def __init__(self, users: dict[str, bytes]) -> None:
        self._users = users
        self._verified: set[bytes] = set()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self._users)

    def allows(self, authorization: str | None) -> bool:
        if not self._users:
            return True
        credentials = _decode(authorization)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self._users.get(user)
        if hashed is None:
            # Spend the same time as for a known user, so that names cannot be probed.
            bcrypt.checkpw(password.encode(), next(iter(self._users.values())))
            return False
        digest = hashlib.sha256(b"%s\0%s\0%s" % (user.encode(), password.encode(), hashed)).digest()
        with self._lock:
            if any(hmac.compare_digest(digest, known) for known in self._verified):
                return True
        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            if len(self._verified) >= _CACHE_LIMIT:
                self._verified.clear()
            self._verified.add(digest)
        return True


def _decode(authorization: str | None) -> tuple[str, str] | None:
    if not authorization or not authorization.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, separator, password = decoded.partition(":")
    return (user, password) if separator else None
