"""Queries shared with other parts of the bundle."""

from __future__ import annotations

# The scaling signal: due actions (claimed and unclaimed) plus in-progress ones, per
# exporter instance, the largest instance winning when two exporters watch one site.
# Future-scheduled pending actions are not in it. KEDA's prometheus trigger divides it by
# its threshold (actions per worker); the overview dashboard shows it verbatim. `scope`
# adds label matchers that pick one release's exporter when several stores share a
# Prometheus (their sites may have the same name, often "wordpress").
KEDA_QUERY = (
    "max(sum by (job, instance) (actionscheduler_due_actions{{{selector}}})"
    " + sum by (job, instance) (actionscheduler_in_progress_actions{{{selector}}}))"
)


def keda_query(site: str, scope: str = "") -> str:
    selector = f'site="{site}"' + (f",{scope}" if scope else "")
    return KEDA_QUERY.format(selector=selector)
