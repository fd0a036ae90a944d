"""HTTP basic auth with bcrypt-hashed passwords, as exporter-toolkit does it.

bcrypt is slow on purpose. A verified user and password pair is remembered (as a SHA-256
digest, never in clear), and checking it costs no thread: a scrape every few seconds does
not pay for bcrypt, and a flood of wrong passwords cannot delay it. The bcrypt checks run
on a few threads of their own, with a bounded queue: past it, a check is refused at once
instead of queueing without end.
"""

from __future__ import annotations

import base64
import binascii
import collections
import hashlib
import hmac
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import bcrypt

# Remembered verifications at the most, so that guessing cannot grow memory.
_CACHE_LIMIT = 64
# Threads for bcrypt, and checks that may wait for them.
BCRYPT_THREADS = 2
MAX_PENDING_CHECKS = 32
# bcrypt reads 72 bytes of a password at the most; a longer one is refused, as Go's
# bcrypt (exporter-toolkit) refuses it.
_MAX_PASSWORD_BYTES = 72


class BasicAuth:
    def __init__(self, users: dict[str, bytes]) -> None:
        self._users = users
        self._verified: set[bytes] = set()
        self._lock = threading.Lock()
        self._pending = 0
        self._executor = ThreadPoolExecutor(BCRYPT_THREADS, thread_name_prefix="bcrypt")
        # An unknown user is checked against a hash of the cost most users have, so that
        # the time of an answer does not tell whether the user exists.
        self._dummy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(_common_cost(users)))

    @property
    def enabled(self) -> bool:
        return bool(self._users)

    def remembered(self, authorization: str | None) -> bool | None:
        """True for a pair verified before (no bcrypt), False for a header that cannot be
        right, None when bcrypt must decide."""
        if not self._users:
            return True
        credentials = _decode(authorization)
        if credentials is None:
            return False
        digest = self._digest(*credentials)
        with self._lock:
            if any(hmac.compare_digest(digest, known) for known in self._verified):
                return True
        return None

    def check(self, authorization: str | None) -> Future[bool] | None:
        """A bcrypt check on the auth threads, or None when too many already wait."""
        with self._lock:
            if self._pending >= MAX_PENDING_CHECKS:
                return None
            self._pending += 1
        future = self._executor.submit(self.allows, authorization)
        future.add_done_callback(self._done)
        return future

    def allows(self, authorization: str | None) -> bool:
        """The whole check, bcrypt included (blocking)."""
        remembered = self.remembered(authorization)
        if remembered is not None:
            return remembered
        credentials = _decode(authorization)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self._users.get(user)
        if not _verify(password, hashed or self._dummy) or hashed is None:
            return False
        with self._lock:
            if len(self._verified) >= _CACHE_LIMIT:
                self._verified.clear()
            self._verified.add(self._digest(user, password))
        return True

    def _digest(self, user: str, password: str) -> bytes:
        hashed = self._users.get(user, b"")
        return hashlib.sha256(b"%s\0%s\0%s" % (user.encode(), password.encode(), hashed)).digest()

    def _done(self, _: Future[bool]) -> None:
        with self._lock:
            self._pending -= 1


def _verify(password: str, hashed: bytes) -> bool:
    encoded = password.encode()
    if len(encoded) > _MAX_PASSWORD_BYTES:
        encoded = encoded[:_MAX_PASSWORD_BYTES]
        bcrypt.checkpw(encoded, hashed)  # the same time as any other refusal
        return False
    return bcrypt.checkpw(encoded, hashed)


def _common_cost(users: dict[str, bytes]) -> int:
    costs = collections.Counter(int(hashed[4:6]) for hashed in users.values())
    return costs.most_common(1)[0][0] if costs else 10


def _decode(authorization: str | None) -> tuple[str, str] | None:
    """User and password of a Basic header; None for anything else. The scheme is
    case-insensitive (RFC 7617, as Go's exporter-toolkit reads it); a header that is not
    ASCII base64 is a refusal, not an error."""
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # ValueError: not ASCII (UnicodeDecodeError too)
        return None
    user, separator, password = decoded.partition(":")
    return (user, password) if separator else None
