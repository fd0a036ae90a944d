"""The hint an unknown key or DSN parameter gets: the closest known name, else them all."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unknown(name: object, known: Iterable[str]) -> str:
    """'did you mean table_prefix?' or 'known: a, b, c'."""
    names = sorted(known)
    closest = difflib.get_close_matches(str(name), names, n=1, cutoff=0.6)
    return f"did you mean {closest[0]}?" if closest else f"known: {', '.join(names)}"
