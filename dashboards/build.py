"""Writes the dashboards' JSON files from their Python source.

python -m dashboards.build           # write dashboards/*.json
python -m dashboards.build --check   # exit 1 when a committed file is out of date

dashboards/native/ holds the forms for native histograms, where they differ (the hooks
dashboard's latency heatmaps); the others read recorded series, the same in both forms.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path

from dashboards import hooks, overview, slo
from dashboards.grafana import Json

FOLDER = Path(__file__).resolve().parent
DASHBOARDS: dict[str, Callable[[], Json]] = {
    "actionscheduler-overview.json": overview.build,
    "actionscheduler-hooks.json": hooks.build,
    "actionscheduler-slo.json": slo.build,
}
# The forms for native histograms, by path under dashboards/.
NATIVE: dict[str, Callable[[], Json]] = {
    "native/actionscheduler-hooks.json": functools.partial(hooks.build, native=True),
}


def rendered(builders: dict[str, Callable[[], Json]] = DASHBOARDS) -> dict[str, str]:
    return {
        name: json.dumps(build(), indent=2, ensure_ascii=False) + "\n"
        for name, build in builders.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    files = {**rendered(), **rendered(NATIVE)}
    return write_or_check(FOLDER, files, "python -m dashboards.build", check=args.check)


def write_or_check(folder: Path, files: dict[str, str], command: str, *, check: bool) -> int:
    """Writes the generated files into `folder`, or with `check` says which differ (exit
    1) and the command that writes them."""
    stale = []
    for name, text in files.items():
        path = folder / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date, run {command}: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
