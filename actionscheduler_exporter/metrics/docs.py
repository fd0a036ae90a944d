"""The tables of docs/metrics.md, generated from the catalog.

`python -m actionscheduler_exporter.metrics.docs` rewrites the tables in place (between the
markers that name each section) and leaves the prose around them alone; `--check` fails
when the file differs from what the catalog generates, as the tests do.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from actionscheduler_exporter.metrics.catalog import ALL, MetricDef, Section

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
_MARKED = re.compile(
    r"(<!-- generated from the catalog: (?P<section>\w+) -->\n).*?"
    r"(<!-- end of generated table -->)",
    flags=re.DOTALL,
)
_HEADER = "| metric | type | labels | tier | meaning |\n| --- | --- | --- | --- | --- |\n"


def table(section: Section) -> str:
    return _HEADER + "".join(_row(metric) for metric in ALL if metric.section == section)


def _row(metric: MetricDef) -> str:
    name = metric.name if metric.kind in ("gauge", "histogram") else metric.sample_name
    labels = " " + ", ".join(f"`{label}`" for label in metric.labels) if metric.labels else ""
    meaning = metric.meaning.replace("|", "\\|")
    return f"| `{name}` | {metric.kind} |{labels} | {metric.tier} | {meaning} |\n"


def generate(text: str) -> str:
    """The document with every marked table replaced by the catalog's."""

    def replace(match: re.Match[str]) -> str:
        section = match.group("section")
        return f"{match.group(1)}{table(section)}{match.group(3)}"  # type: ignore[arg-type]

    return _MARKED.sub(replace, text)


def sections(text: str) -> list[str]:
    return [match.group("section") for match in _MARKED.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when the file is stale")
    parser.add_argument("path", nargs="?", type=Path, default=DOC)
    args = parser.parse_args(argv)
    current = args.path.read_text()
    wanted = generate(current)
    if args.check:
        if current != wanted:
            print(
                f"{args.path} differs from the catalog: "
                "run python -m actionscheduler_exporter.metrics.docs"
            )
            return 1
        return 0
    args.path.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
