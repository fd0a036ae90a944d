"""The objectives document: what is promised, per site and per group, and its checks.

A scope is the set of runs one objective judges: the default scope (every site and group
not named), a named site (its groups not named), or a named group (on every site). A
named site or group takes the objectives it states and the defaults for the rest.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from actionscheduler_exporter.collectors.log_events.collector import START_DELAY_BUCKETS

ScopeKind = Literal["default", "site", "group"]
_WINDOW = re.compile(r"^([1-9][0-9]*)d$")
_TOP_KEYS = {"window", "minimumRuns", "defaults", "sites", "groups"}
_SLI_KEYS = {"startOnTime": {"objective", "withinSeconds"}, "success": {"objective"}}
# Texts a name may not hold: where the forms put a query's range (`$window`, Sloth's
# `{{.window}}`), which would be replaced inside the name too.
_TEMPLATE_TOKENS = ("$window", "{{", "}}")


class ObjectivesError(ValueError):
    """A bad objectives document: names the key and the problem."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True)
class Objective:
    percent: float  # e.g. 99.5
    within_seconds: float | None = None  # start on time only

    @property
    def ratio(self) -> float:
        return self.percent / 100

    @property
    def budget(self) -> float:
        """The share of runs allowed to be bad."""
        return round(1 - self.ratio, 12)


@dataclass(frozen=True)
class Scope:
    kind: ScopeKind
    name: str  # "" for the default scope
    start_on_time: Objective
    success: Objective

    @property
    def slug(self) -> str:
        return "default" if self.kind == "default" else f"{self.kind}-{self.name}"


@dataclass(frozen=True)
class Objectives:
    window_days: int
    minimum_runs: int
    scopes: tuple[Scope, ...]

    @property
    def window(self) -> str:
        return f"{self.window_days}d"

    @property
    def named_sites(self) -> tuple[str, ...]:
        return tuple(scope.name for scope in self.scopes if scope.kind == "site")

    @property
    def named_groups(self) -> tuple[str, ...]:
        return tuple(scope.name for scope in self.scopes if scope.kind == "group")


def load(path: Path, *, native: bool = False) -> Objectives:
    """`native`: for the native-histogram rules only, where withinSeconds may be any
    number of seconds (histogram_fraction reads any threshold, not only a bucket bound)."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ObjectivesError(str(path), f"not YAML ({error})") from None
    return parse(document, native=native)


def parse(document: Any, *, native: bool = False) -> Objectives:
    if not isinstance(document, dict):
        raise ObjectivesError("(document)", "must be a mapping")
    _known(document, _TOP_KEYS, "")
    window = _window(document.get("window", "28d"))
    minimum = document.get("minimumRuns", 20)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 1:
        raise ObjectivesError(
            "minimumRuns", f"must be a whole number of runs, 1 or more, not {minimum!r}"
        )
    defaults = _mapping(document.get("defaults"), "defaults")
    _known(defaults, set(_SLI_KEYS), "defaults.")
    for key in _SLI_KEYS:
        if key not in defaults:
            raise ObjectivesError(
                f"defaults.{key}", "is missing: the defaults state both objectives"
            )
    base_start = _objective(defaults["startOnTime"], "defaults.startOnTime", None, native)
    base_success = _objective(defaults["success"], "defaults.success", None, native)
    scopes = [Scope("default", "", base_start, base_success)]
    for kind, section in (("site", "sites"), ("group", "groups")):
        for name, entry in sorted(_mapping(document.get(section), section).items()):
            key = f"{section}.{name}"
            if not isinstance(name, str) or not name:
                raise ObjectivesError(key, "must be named by a non-empty text")
            _check_name(name, section)
            entry = _mapping(entry, key)
            _known(entry, set(_SLI_KEYS), f"{key}.")
            start = _objective(entry.get("startOnTime"), f"{key}.startOnTime", base_start, native)
            success = _objective(entry.get("success"), f"{key}.success", base_success, native)
            scopes.append(Scope(kind, name, start, success))  # type: ignore[arg-type]
    return Objectives(window, minimum, tuple(scopes))


def _objective(raw: Any, key: str, default: Objective | None, native: bool = False) -> Objective:
    if raw is None and default is not None:
        return default
    entry = _mapping(raw, key)
    sli = key.rsplit(".", 1)[1]
    _known(entry, _SLI_KEYS[sli], f"{key}.")
    percent = entry.get("objective", default.percent if default else None)
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 < percent < 100:
        raise ObjectivesError(
            f"{key}.objective", f"must be a percentage above 0 and below 100, not {percent!r}"
        )
    within = None
    if sli == "startOnTime":
        within = entry.get("withinSeconds", default.within_seconds if default else None)
        if native:
            if (
                isinstance(within, bool)
                or not isinstance(within, int | float)
                or not 0 < within < float("inf")
            ):
                raise ObjectivesError(
                    f"{key}.withinSeconds", f"must be a number of seconds above 0, not {within!r}"
                )
        elif (
            isinstance(within, bool)
            or not isinstance(within, int | float)
            or float(within) not in START_DELAY_BUCKETS
        ):
            bounds = ", ".join(f"{bound:g}" for bound in START_DELAY_BUCKETS)
            raise ObjectivesError(
                f"{key}.withinSeconds",
                "must be a bucket bound of actionscheduler_action_start_delay_seconds"
                f" ({bounds}), not {within!r}",
            )
        within = float(within)
    return Objective(float(percent), within)


def _check_name(name: str, section: str) -> None:
    key = f"{section}[{json.dumps(name, ensure_ascii=False)}]"  # as the chart's %q writes it
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ObjectivesError(
            key, "must not hold control characters (a newline, a tab...): no rule can match it"
        )
    for token in _TEMPLATE_TOKENS:
        if token in name:
            raise ObjectivesError(
                key, f"must not hold {token!r}: the forms use it where a query's range goes"
            )


def _window(raw: Any) -> int:
    match = _WINDOW.match(str(raw))
    if not match:
        raise ObjectivesError("window", f"must be whole days such as 28d or 30d, not {raw!r}")
    return int(match.group(1))


def _mapping(raw: Any, key: str) -> dict[Any, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ObjectivesError(key, "must be a mapping")
    return raw


def _known(entry: dict[Any, Any], known: set[str], prefix: str) -> None:
    unknown = sorted(str(key) for key in entry if key not in known)
    if unknown:
        raise ObjectivesError(
            f"{prefix}{unknown[0]}", f"is not a known key (known: {', '.join(sorted(known))})"
        )
