"""The SLIs as PromQL, per scope: what every form of the objectives measures.

Start on time: runs whose start came later than `withinSeconds` after they were due, out
of all runs started (the start-delay histogram's bucket and count). Success: failed runs,
of every reason, out of all runs that ended (`actionscheduler_actions_finished_total`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from slo.objectives import Objectives, Scope

START_DELAY = "actionscheduler_action_start_delay_seconds"
FINISHED = "actionscheduler_actions_finished_total"
START_ON_TIME = "start-on-time"
SUCCESS = "success"
SLIS = (START_ON_TIME, SUCCESS)
_REGEX_SPECIAL = set(".+*?()|[]{}^$\\")
# Where a query's range goes: replaced by `at` (or by Sloth's own template variable).
WINDOW = "$window"


def at(query: str, window: str) -> str:
    return query.replace(WINDOW, window)


def regex_alternatives(values: tuple[str, ...]) -> str:
    """A PromQL regex matching exactly these values, escaped for the string literal: a
    regex escape (`\\.`), then every backslash and quote of it for the literal."""
    regexes = ("".join(f"\\{c}" if c in _REGEX_SPECIAL else c for c in value) for value in values)
    return "|".join(quoted(regex) for regex in regexes)


def quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


@dataclass(frozen=True)
class Selection:
    """Which raw series a scope reads, and the labels its SLI keeps."""

    matchers: tuple[str, ...]
    grouping: tuple[str, ...]

    def selector(self, *extra: str) -> str:
        return "{" + ", ".join((*self.matchers, *extra)) + "}"

    @property
    def by(self) -> str:
        return ", ".join(self.grouping)


def selection(objectives: Objectives, scope: Scope) -> Selection:
    groups = objectives.named_groups
    not_named_groups = (f'group!~"{regex_alternatives(groups)}"',) if groups else ()
    if scope.kind == "group":
        return Selection((f'group="{quoted(scope.name)}"',), ("site", "group"))
    if scope.kind == "site":
        return Selection((f'site="{quoted(scope.name)}"', *not_named_groups), ("site",))
    sites = objectives.named_sites
    not_named_sites = (f'site!~"{regex_alternatives(sites)}"',) if sites else ()
    return Selection((*not_named_sites, *not_named_groups) or ('site!=""',), ("site",))


@dataclass(frozen=True)
class Sli:
    """An SLI's PromQL with WINDOW where the range goes: error and total event rates."""

    name: str
    errors: str
    total: str
    total_counter: str  # the counter selector runs are counted with (low-traffic guard)
    good_selector: str  # for forms that take the good events as a selector (Pyrra latency)
    error_selector: str  # for forms that take the bad events as a selector (Pyrra ratio)
    # Runs over WINDOW per scope, for the low-traffic guard; "": the increase of total_counter.
    runs: str = ""


def sli(objectives: Objectives, scope: Scope, name: str, *, native: bool = False) -> Sli:
    """`native`: the start delay read as a native histogram, whose share of runs within
    any threshold is histogram_fraction's (the success SLI is the same in both forms)."""
    chosen = selection(objectives, scope)
    if name == START_ON_TIME and native:
        within = scope.start_on_time.within_seconds
        histogram = f"{START_DELAY}{chosen.selector()}"
        total = f"sum by ({chosen.by}) (histogram_count(rate({histogram}[{WINDOW}])))"
        on_time = (
            f"histogram_fraction(0, {within:g}, sum by ({chosen.by}) (rate({histogram}[{WINDOW}])))"
        )
        errors = f"({total} * (1 - {on_time}))"
        runs = f"sum by ({chosen.by}) (histogram_count(increase({histogram}[{WINDOW}])))"
        return Sli(name, errors, total, histogram, "", "", runs)
    if name == START_ON_TIME:
        within = scope.start_on_time.within_seconds
        count = f"{START_DELAY}_count{chosen.selector()}"
        bound = f'le="{within!r}"'
        good = f"{START_DELAY}_bucket{chosen.selector(bound)}"
        total = f"sum by ({chosen.by}) (rate({count}[{WINDOW}]))"
        errors = f"({total} - sum by ({chosen.by}) (rate({good}[{WINDOW}])))"
        return Sli(name, errors, total, count, good, "")
    failed = 'outcome="failed"'
    bad = f"{FINISHED}{chosen.selector(failed)}"
    every = f"{FINISHED}{chosen.selector()}"
    errors = f"sum by ({chosen.by}) (rate({bad}[{WINDOW}]))"
    total = f"sum by ({chosen.by}) (rate({every}[{WINDOW}]))"
    return Sli(name, errors, total, every, "", bad)


def objective_of(scope: Scope, name: str) -> float:
    return (scope.start_on_time if name == START_ON_TIME else scope.success).percent


ALERT_NAMES = {
    START_ON_TIME: "ActionSchedulerStartOnTimeBudgetBurn",
    SUCCESS: "ActionSchedulerSuccessBudgetBurn",
}
RUNBOOKS = {
    START_ON_TIME: "slo-start-on-time-budget-burn.md",
    SUCCESS: "slo-success-budget-burn.md",
}


def promise(scope: Scope, name: str) -> str:
    """What the objective promises, in words."""
    if name == START_ON_TIME:
        objective = scope.start_on_time
        return (
            f"{objective.percent:g} % of runs start within {objective.within_seconds:g} s of"
            " being due"
        )
    return f"{scope.success.percent:g} % of runs do not fail"


def description(scope: Scope, name: str) -> str:
    """The promise and whose runs it judges (the same in every form)."""
    where = {
        "default": "every site and group without objectives of their own",
        "site": f"site {scope.name}",
        "group": f"group {scope.name} on every site",
    }[scope.kind]
    return f"{promise(scope, name)}: {where}."


def slo_name(scope: Scope, name: str) -> str:
    """A name for the objective of a scope: DNS-safe, for resources and documents, and
    unique: a name the safe spelling changed (`shop.a`, `Shop`) gets a short hash of
    itself, so that it cannot meet another's (`shop-a`)."""
    if scope.kind == "default":
        return name
    safe = "".join(c if c.isascii() and c.isalnum() else "-" for c in scope.name.lower())
    safe = safe.strip("-")
    if safe != scope.name:
        digest = hashlib.sha256(scope.name.encode("utf-8")).hexdigest()[:6]
        safe = f"{safe}-{digest}" if safe else digest
    return f"{name}-{scope.kind}-{safe}"
