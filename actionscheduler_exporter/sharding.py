"""Which sites this exporter serves when several share the work (a StatefulSet of N).

Like kube-state-metrics' sharding: every replica reads the same configuration and keeps
the sites whose stable hash falls on its ordinal, so each site is served by exactly one
replica and no series is exported twice. The unit is the `site` label: a configured site,
or one subsite of a `table_prefix: auto` network, so a large network spreads too.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

# The shard of a StatefulSet's pod is the ordinal at the end of its name (exporter-3).
FROM_POD_NAME = "from-pod-name"
ENV_POD_NAME = "POD_NAME"
_ORDINAL = re.compile(r"-(\d+)$")


@dataclass(frozen=True)
class Shard:
    index: int = 0
    total: int = 1

    def __post_init__(self) -> None:
        if self.total < 1 or not 0 <= self.index < self.total:
            raise ValueError(
                f"shard {self.index} does not exist among {self.total} (0 to {self.total - 1})"
            )

    def owns(self, site_label: str) -> bool:
        if self.total == 1:
            return True
        digest = hashlib.sha256(site_label.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.total == self.index

    def part(self, index: int, parts: int) -> Shard:
        """The part `index` of `parts` of this shard's sites: a site's hash falls on
        this shard (modulo `total`) and on the part (the hash divided by `total`,
        modulo `parts`) together, as the shard `self.index + self.total * index` of
        `self.total * parts`; every site of the shard is in exactly one part."""
        if not 0 <= index < parts:
            raise ValueError(f"part {index} does not exist among {parts} (0 to {parts - 1})")
        return Shard(self.index + self.total * index, self.total * parts)

    def __str__(self) -> str:
        return f"{self.index} of {self.total}"


ALL_SITES = Shard()


def parse_shard(value: str | None, total: int, environ: dict[str, str] | None = None) -> Shard:
    """The shard from `--shard` (a number, or `from-pod-name`) and `--total-shards`."""
    if value is None:
        if total != 1:
            raise ValueError("--total-shards needs --shard (a number, or from-pod-name)")
        return ALL_SITES
    if value == FROM_POD_NAME:
        env = os.environ if environ is None else environ
        pod = env.get(ENV_POD_NAME, "")
        match = _ORDINAL.search(pod)
        if not match:
            raise ValueError(
                f"--shard {FROM_POD_NAME}: ${ENV_POD_NAME} must end in the pod's ordinal "
                f"(a StatefulSet pod such as exporter-2), got {pod!r}"
            )
        index = int(match.group(1))
    elif value.isdigit():
        index = int(value)
    else:
        raise ValueError(f"--shard must be a number or {FROM_POD_NAME}, got {value!r}")
    return Shard(index, total)
