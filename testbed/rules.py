"""Renders the shipped rule files with every duration shortened, for tests and demos.

    python -m testbed.rules --time-scale 0.0167 --out /tmp/rules rules/*.rules.yml

multiplies every `for:`, range selector (`[15m]`), `offset` and group `interval` by the time
scale (here
1/60: fifteen minutes become fifteen seconds), so an end-to-end test sees every alert fire
in seconds. `--runbook-base` points runbook_url at another copy of docs/runbooks/ (a fork,
an internal wiki). The shipped files are never edited.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import yaml

RUNBOOK_BASE = (
    "https://github.com/actionscheduler-exporter/actionscheduler-exporter/blob/main/docs/runbooks/"
)
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_IN_EXPRESSION = re.compile(r"(\[|offset\s+)((?:\d+(?:ms|s|m|h|d|w|y))+)")


def seconds(duration: str) -> float:
    parts = _DURATION.findall(duration)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return sum(int(number) * _UNITS[unit] for number, unit in parts)


def scaled(duration: str, scale: float) -> str:
    return f"{max(1, round(seconds(duration) * scale))}s"


def scale_expression(expression: str, scale: float) -> str:
    return _IN_EXPRESSION.sub(lambda m: m.group(1) + scaled(m.group(2), scale), expression)


def render(
    document: dict[str, Any], scale: float = 1.0, runbook_base: str | None = None
) -> dict[str, Any]:
    for group in document.get("groups", []):
        if scale != 1.0 and "interval" in group:
            group["interval"] = scaled(str(group["interval"]), scale)
        for rule in group.get("rules", []):
            if scale != 1.0:
                rule["expr"] = scale_expression(str(rule["expr"]), scale)
                if "for" in rule:
                    rule["for"] = scaled(str(rule["for"]), scale)
            annotations = rule.get("annotations", {})
            if runbook_base and "runbook_url" in annotations:
                annotations["runbook_url"] = annotations["runbook_url"].replace(
                    RUNBOOK_BASE, runbook_base
                )
    return document


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="folder for the rendered files")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--runbook-base", help=f"replaces {RUNBOOK_BASE}")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.files:
        document = yaml.safe_load(path.read_text())
        rendered = render(document, args.time_scale, args.runbook_base)
        (args.out / path.name).write_text(yaml.safe_dump(rendered, sort_keys=False, width=120))


if __name__ == "__main__":
    main()
