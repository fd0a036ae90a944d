"""Content coding of the answer: gzip when the client's Accept-Encoding takes it.

Accept-Encoding is read as RFC 9110 (section 12.5.3) lays out: each coding has a weight
(`q`, 1 when absent; 0 means "not acceptable"), `*` stands for every coding not named,
and `identity` (no coding) is acceptable unless refused by name or by `*;q=0`. gzip is
used when its weight is above 0 and at least identity's (identity left out of the header
is the fallback, after any coding named): Prometheus asks for it and a big answer
shrinks tenfold. Otherwise, even when identity is refused too, the answer
goes uncoded (RFC 9110 allows it; a 415 would only lose the scrape).
"""

from __future__ import annotations

import re

GZIP = "gzip"
IDENTITY = "identity"
# A weight: "0" to "1" with up to three decimals (RFC 9110, section 12.4.2).
_QVALUE = re.compile(r"(0(\.[0-9]{0,3})?|1(\.0{0,3})?)")


def weights(header: str) -> dict[str, float] | None:
    """Each coding named, lowercase, with its weight; None for a header that cannot be
    read (an entry with a weight that is not one), which is treated as no header."""
    found: dict[str, float] = {}
    for entry in header.split(","):
        coding, *parameters = (part.strip() for part in entry.split(";"))
        if not coding:
            continue
        weight = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                if not _QVALUE.fullmatch(value.strip()):
                    return None
                weight = float(value.strip())
            # other parameters (`level=1`) are not part of the grammar's weight: ignored
        # A coding named twice: the first counts, as for most readers.
        found.setdefault(coding.lower(), weight)
    return found


def chosen(header: str | None) -> str:
    """`gzip` or `identity`: what to answer with for this Accept-Encoding."""
    if header is None:
        return IDENTITY  # no header: any coding would do, but identity is safest
    named = weights(header)
    if named is None:
        return IDENTITY
    star = named.get("*")
    gzip = named.get(GZIP, star if star is not None else 0.0)
    if gzip <= 0:
        return IDENTITY
    # identity, named or covered by `*`, wins when preferred; left out, it is only the
    # fallback (acceptable, but after every coding named).
    identity = named.get(IDENTITY, star)
    return GZIP if identity is None or gzip >= identity else IDENTITY
