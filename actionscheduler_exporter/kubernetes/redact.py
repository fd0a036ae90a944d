"""Text from outside the exporter (the API's error messages, an exec plugin's stderr) made
fit for a log line: no token, no control character, a bounded length.

An API server or a proxy in front of it may echo the request's Authorization header in its
error text, and a credential plugin may print the token it failed to use: such text is never
logged as it came.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

LIMIT = 200  # characters kept of a sanitized text
REDACTED = "[redacted]"
# Only the start of a text is looked at: the rest would be cut anyway.
_SCAN = 4096
_TOKEN_CHARS = r"A-Za-z0-9_\-.+/=~%"  # noqa: S105 (a character class)
_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+|%20)[^\s\"',;]{8,}")
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}(\.[A-Za-z0-9_-]*)?")
# Service-account JWTs, EKS's k8s-aws-v1.… and Google's ya29.… tokens, base64 key data:
# long runs without a space or a colon. Kubernetes names of more than 31 characters are
# withheld too, a price worth paying.
_LONG = re.compile(rf"[{_TOKEN_CHARS}]{{32,}}")
_CUT_WORD = re.compile(rf"[{_TOKEN_CHARS}]+$")


def sanitize(text: str, secrets: Iterable[str | None] = (), limit: int = LIMIT) -> str:
    """`text` with the given secrets and anything token-like replaced by [redacted], control
    and format characters (newlines, ANSI escapes, bidi overrides) made spaces, whitespace
    collapsed and the whole cut to `limit` characters."""
    scanned = text[:_SCAN]
    if len(text) > _SCAN:
        # The cut may have split a token below the length that marks it as one.
        scanned = _CUT_WORD.sub("", scanned)
    for secret in secrets:
        if secret:
            scanned = scanned.replace(secret, REDACTED)
    scanned = _SCHEME.sub(lambda match: f"{match.group(1)} {REDACTED}", scanned)
    scanned = _JWT.sub(REDACTED, scanned)
    return printable(_LONG.sub(REDACTED, scanned), limit)


def printable(text: str, limit: int = LIMIT) -> str:
    """`text` on one line: control and format characters (newlines, ANSI escapes, bidi
    overrides) made spaces, whitespace collapsed, cut to `limit` characters. For text that
    holds no secret but may forge a log line (a kubeconfig's install hint)."""
    text = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in text[:_SCAN])
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text
