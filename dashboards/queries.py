"""Queries shared with other parts of the bundle."""

from __future__ import annotations

# The scaling signal: due actions (claimed and unclaimed) plus in-progress ones, per
# exporter instance, the largest instance winning when two exporters watch one site.
# Future-scheduled pending actions are not in it. KEDA's prometheus trigger divides it by
# its threshold (actions per worker); the overview dashboard shows it verbatim.
KEDA_QUERY = (
    'max(sum by (job, instance) (actionscheduler_due_actions{{site="{site}"}})'
    ' + sum by (job, instance) (actionscheduler_in_progress_actions{{site="{site}"}}))'
)


def keda_query(site: str) -> str:
    return KEDA_QUERY.format(site=site)
