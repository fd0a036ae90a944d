"""The claimed open actions, read in one pass that two collectors share.

The due collector reports the claimed due actions and the claims collector the claims
that hold open actions; both are read from the same entries of the `(claim_id, status,
scheduled_date_gmt)` index (every open action with a claim), index-only. Each collector
declares this one subquery among its columns, and the round's statement sends it once
for both (`sources.statement_parts`): the server's work per store is a cost per subquery
(docs/performance.md, "Values of the same rows in one pass"). Alone, each collector reads
it in a statement of its own, the same rows.
"""

from __future__ import annotations

import functools

from actionscheduler_exporter.sources.database import values_together


@functools.lru_cache(maxsize=4096)
def claimed_open_actions(actions: str) -> str:
    """The claimed due actions, and the distinct claims of the claimed pending and running
    ones: the same count as ActionScheduler_Abstract_QueueRunner's claim count, which the
    runner compares with the concurrent-batches limit. Made once per table."""
    return values_together(
        f"FROM {actions} WHERE claim_id != 0 AND status IN ('pending', 'in-progress')",
        "COUNT(CASE WHEN status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP() THEN 1 END)",
        "COUNT(DISTINCT claim_id)",
    )
