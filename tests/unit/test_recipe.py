"""CONTRIBUTING.md's recipe "Add a metric family", walked for a hot family in a copy of the
repository: only the places the recipe names are touched, and the fast tier passes with
the new collector running in every round. (tests/test_recipe.py shows the same family
emitted from a real MariaDB.)"""

from __future__ import annotations

import filecmp
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the copy holds: the package, its tests and the files the recipe edits.
COPIED = (
    "actionscheduler_exporter", "tests", "testbed", "docs", "pyproject.toml", "CHANGELOG.md",
    "CONTRIBUTING.md",
)  # fmt: skip

CATALOG_ENTRY = """
GROUP_ROWS = _define(
    "actionscheduler_group_rows", "gauge",
    "Rows in the groups table.",
    tier="hot", section="queue", labels=("recipe",),
    meaning="Rows in the groups table, counted (the recipe's example).",
)
"""
COLLECTOR = '''"""The recipe's example: the groups table's rows."""

from __future__ import annotations

from collections.abc import Iterator

from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample
from actionscheduler_exporter.sources.database import Collector, Columns, DatabaseContext


class GroupRowsCollector(Collector):
    name = "group_rows"
    metrics = (catalog.GROUP_ROWS,)

    def columns(self, context: DatabaseContext) -> Columns:
        return Columns((f"SELECT COUNT(*) FROM {context.tables.groups}",))

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        (rows,) = context.values_of(self)
        yield sample(catalog.GROUP_ROWS, rows or 0, recipe="example")
'''
TRUTH_ROW = """    TruthRow(catalog.GROUP_ROWS, {"recipe": "example"}, lambda t: len(t.raw.groups)),
"""
FAST_TEST = """

def test_the_groups_rows_are_counted() -> None:
    from actionscheduler_exporter.collectors.group_rows import GroupRowsCollector

    script = healthy_store().answer("SELECT COUNT(*) FROM wp_actionscheduler_groups", [(7,)])
    found = read(GroupRowsCollector(), script)
    assert found.value("actionscheduler_group_rows", recipe="example") == 7
"""
CHANGELOG_LINE = "- `actionscheduler_group_rows`: rows in the groups table.\n"


def insert(path: Path, anchor: str, text: str, *, before: bool = True) -> None:
    content = path.read_text(encoding="utf-8")
    assert anchor in content, (path, anchor)
    new = text + anchor if before else anchor + text
    path.write_text(content.replace(anchor, new, 1), encoding="utf-8")


def run(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=copy, capture_output=True, text=True, timeout=300
    )


def changed(copy: Path) -> set[str]:
    """The files of the copy that differ from the repository's, or are new."""
    found: set[str] = set()
    for path in copy.rglob("*"):
        relative = path.relative_to(copy)
        if path.is_dir() or "__pycache__" in relative.parts or ".pytest_cache" in relative.parts:
            continue
        original = ROOT / relative
        if not original.exists() or not filecmp.cmp(path, original, shallow=False):
            found.add(relative.as_posix())
    return found


def recipe_places() -> set[str]:
    """The files the numbered steps of CONTRIBUTING.md's recipe name, in backticks."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    recipe = text.split("## Add a metric family", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d+\. .*?(?=^\d+\. |^\S|\Z)", recipe, flags=re.M | re.S)
    return {path for step in steps for path in re.findall(r"`([\w./-]+\.(?:py|md))`", step)}


def test_the_recipe_adds_a_hot_family_in_the_places_it_names(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    for part in COPIED:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, copy / part)
    package = copy / "actionscheduler_exporter"

    # 1. The catalog entry (before the exporter's own families), and the docs' tables.
    insert(package / "metrics" / "catalog.py", "# The exporter itself ----", CATALOG_ENTRY)
    assert run(copy, "-m", "actionscheduler_exporter.metrics.docs", "--check").returncode == 1
    assert run(copy, "-m", "actionscheduler_exporter.metrics.docs").returncode == 0
    # 2. The collector, and its line in the one list of sources.
    (package / "collectors" / "group_rows.py").write_text(COLLECTOR, encoding="utf-8")
    listing = package / "collectors" / "__init__.py"
    insert(
        listing,
        "from actionscheduler_exporter.collectors.in_progress import",
        "from actionscheduler_exporter.collectors.group_rows import GroupRowsCollector\n",
    )
    insert(listing, "        TablesCollector(),\n", "        GroupRowsCollector(),\n", before=False)
    # 3. The truth: one row.
    insert(
        copy / "tests" / "support" / "scenarios.py", "    TruthRow(catalog.DUE_UNSPLIT", TRUTH_ROW
    )
    # 4. The fast test.
    fast = copy / "tests" / "unit" / "test_collectors.py"
    fast.write_text(fast.read_text(encoding="utf-8") + FAST_TEST, encoding="utf-8")
    # 5. The CHANGELOG line.
    insert(copy / "CHANGELOG.md", "### Changed\n", "### Added\n" + CHANGELOG_LINE + "\n")

    touched = changed(copy)
    assert touched == {
        "actionscheduler_exporter/metrics/catalog.py",
        "docs/metrics.md",
        "actionscheduler_exporter/collectors/group_rows.py",
        "actionscheduler_exporter/collectors/__init__.py",
        "tests/support/scenarios.py",
        "tests/unit/test_collectors.py",
        "CHANGELOG.md",
    }
    # The recipe names every place it touches, and nothing more (the new collector's file
    # by its folder).
    named = recipe_places()
    assert named == (touched - {"actionscheduler_exporter/collectors/group_rows.py"}), named

    # The fast tier, with the new collector read in every round.
    tests = ["tests/unit/test_collectors.py", "tests/unit/test_rounds.py",
             "tests/unit/test_metrics_catalog.py", "tests/unit/test_writer.py"]  # fmt: skip
    passed = run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests)
    assert passed.returncode == 0, passed.stdout[-3000:]
    assert "failed" not in passed.stdout
    check = (
        "from actionscheduler_exporter.collectors import site_sources\n"
        "from actionscheduler_exporter.config import SiteConfig\n"
        "names = [s.name for s in site_sources(SiteConfig(name='shop')).in_round]\n"
        "assert 'group_rows' in names, names\n"
    )
    assert run(copy, "-c", check).returncode == 0
