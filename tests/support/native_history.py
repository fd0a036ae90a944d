"""A queue history with known start delays, written to a real store, and what the native
histograms must hold for it, computed by hand from the same delays: the observations per
hook and per group (hooks folded as the exporter folds them), the bucket of schema 3 each
lands in, quantiles by rank and fractions by counting."""

from __future__ import annotations

import datetime as dt
import math
import random
from collections import Counter
from dataclasses import dataclass, field

from testbed.store import ActionSchedulerStore

ZERO_THRESHOLD = 0.5
HOOKS = ("woocommerce_deliver_webhook_async", "mailchimp_sync_order", "wc_admin_import_orders")
GROUPS = ("webhooks", "imports")


@dataclass
class History:
    """Observations (whole seconds) per label value."""

    by_hook: dict[str, list[int]] = field(default_factory=dict)
    by_group: dict[str, list[int]] = field(default_factory=dict)
    durations: dict[str, list[int]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(values) for values in self.by_hook.values())


def write(store: ActionSchedulerStore, actions: int, top_hooks: int, seed: int = 41) -> History:
    """`actions` single actions, each started `delay` seconds after its scheduled date and
    completed `run` seconds later, in one transaction (a scrape sees all or none)."""
    rng = random.Random(seed)
    history = History()
    kept: list[str] = []  # the first top_hooks hooks seen keep their name (StickyFold)
    with store.frozen() as now, store.transaction():
        for _ in range(actions):
            hook = rng.choice(HOOKS)
            group = GROUPS[HOOKS.index(hook) % len(GROUPS)]
            # Mostly on time, a long tail: the shape of a real queue's waits.
            delay = (
                rng.choice((0, 0, 1, 2, 3)) if rng.random() < 0.4 else int(rng.expovariate(1 / 90))
            )
            run = rng.randint(0, 40)
            if hook not in kept and len(kept) < top_hooks:
                kept.append(hook)
            name = hook if hook in kept else "other"
            with store.seconds_ago(run):
                action = store.create(
                    hook, group=group, scheduled=now - dt.timedelta(seconds=run + delay)
                )
                store.start(action)
            store.complete(action)
            history.by_hook.setdefault(name, []).append(delay)
            history.by_group.setdefault(group, []).append(delay)
            history.durations.setdefault(name, []).append(run)
    return history


def seed_every_series(store: ActionSchedulerStore) -> int:
    """One on-time run of every hook (so of every group): their series exist before a
    history, and a rate over the history's window is the history's delays alone."""
    with store.frozen(), store.transaction():
        for hook in HOOKS:
            action = store.create(hook, group=GROUPS[HOOKS.index(hook) % len(GROUPS)])
            store.start(action)
            store.complete(action)
    return len(HOOKS)


def bucket_index(value: float) -> int:
    """Schema 3's bucket of a value above the zero threshold: the first i with
    value <= 2**(i/8), walked up to (not the exporter's logarithm)."""
    index = -8
    while value > 2 ** (index / 8):
        index += 1
    return index


def bucket_bounds(value: float) -> tuple[float, float]:
    """The bucket holding `value`, as Prometheus reads it: the zero bucket is [0, 0.5]
    when there are positive buckets."""
    if value <= ZERO_THRESHOLD:
        return 0.0, ZERO_THRESHOLD
    index = bucket_index(value)
    return max(ZERO_THRESHOLD, 2 ** ((index - 1) / 8)), 2 ** (index / 8)


def native_counts(values: list[int]) -> tuple[int, Counter[int]]:
    """The zero bucket's count and the positive buckets' counts."""
    zero = sum(1 for value in values if value <= ZERO_THRESHOLD)
    return zero, Counter(bucket_index(value) for value in values if value > ZERO_THRESHOLD)


def quantile(values: list[int], q: float) -> int:
    """The observation at rank q·n (the one Prometheus' bucket search stops in)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def fraction(values: list[int], upper: float) -> float:
    return sum(1 for value in values if value <= upper) / len(values)


def fraction_bounds(values: list[int], upper: float) -> tuple[float, float]:
    """What histogram_fraction(0, upper) may answer: exact on a bucket boundary, else
    between the fractions at the edges of the bucket holding `upper`."""
    low, high = bucket_bounds(upper)
    if upper in (low, high):
        exact = fraction(values, upper)
        return exact, exact
    return fraction(values, low), fraction(values, high)
