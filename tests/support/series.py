"""Which series exist (the catalog's, the recording rules', the documented external ones)
and which series a PromQL expression selects: what ties rules and dashboards to metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from actionscheduler_exporter.metrics import catalog

ROOT = Path(__file__).resolve().parents[2]
RULES = sorted((ROOT / "rules").glob("*.rules.yml"))
METRICS_DOC = ROOT / "docs" / "metrics.md"
_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
}


def rules() -> list[dict[str, Any]]:
    return [
        rule
        for path in RULES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
    ]


def referenced_names(expression: str) -> set[str]:
    """Metric and recording-rule names a PromQL expression selects."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expression)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\boffset\s+[0-9a-z]+", "", text)  # offsets
    text = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text
    )  # label lists
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        word = match.group(0)
        if rest.startswith("(") or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names


def exported_series() -> set[str]:
    names = set()
    for metric in catalog.ALL:
        names.add(metric.sample_name)
        if metric.kind == "histogram":
            names |= {f"{metric.name}_{suffix}" for suffix in ("bucket", "sum", "count")}
    return names


def external_series() -> set[str]:
    """Series from elsewhere that the rules use, as docs/metrics.md lists them."""
    section = METRICS_DOC.read_text().split("## Series from elsewhere", 1)[1].split("\n## ")[0]
    return set(re.findall(r"^\| `([a-zA-Z_]+)` \|", section, flags=re.MULTILINE))
