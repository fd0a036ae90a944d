"""The garbage collector tuned for a process that scrapes many sites."""

from __future__ import annotations

import gc


def tune_garbage_collection() -> None:
    """A scrape of a thousand sites allocates a few hundred thousand short-lived objects;
    with the default thresholds the collector walks every long-lived one (the imported
    modules, the caches, the counts) many times per scrape. What exists at start is
    frozen out of its walks, and the young generation is collected less often: about a
    tenth of such a scrape's time (docs/performance.md). Reference counting still frees
    everything that is not in a cycle at once."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
