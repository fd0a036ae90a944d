"""The exporter's packages import downwards only, in the order CONTRIBUTING.md writes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "actionscheduler_exporter"


def layers() -> list[list[str]]:
    """The numbered list under "### Layers" in CONTRIBUTING.md: paths per layer."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("### Layers", 1)[1].split("\n## ", 1)[0]
    return [
        re.findall(r"`([^`]+)`", line)
        for line in section.splitlines()
        if re.match(r"^\d+\. ", line)
    ]


def place_of(path: Path, order: list[list[str]]) -> tuple[int, str]:
    """The layer of a module and the entry (package or module) that holds it."""
    relative = path.relative_to(ROOT).as_posix()
    for index, entries in enumerate(order):
        for entry in entries:
            if relative == entry or (entry.endswith("/") and relative.startswith(entry)):
                return index, entry
    raise AssertionError(f"{relative} is in no layer of CONTRIBUTING.md: add it to one")


def module_path(name: str) -> Path | None:
    if not (name == "actionscheduler_exporter" or name.startswith("actionscheduler_exporter.")):
        return None
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imports_of(path: Path) -> set[Path]:
    """Every exporter module the file imports, at any depth of the file (TYPE_CHECKING
    and function-level imports included)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [module_path(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from package import module` imports the module; `from module import name`
            # the module that defines the name.
            targets = [
                module_path(f"{node.module}.{alias.name}") or module_path(node.module)
                for alias in node.names
            ]
        else:
            continue
        found.update(target for target in targets if target is not None and target != path)
    return found


def graph() -> dict[Path, set[Path]]:
    return {path: imports_of(path) for path in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_layer_and_imports_only_downwards() -> None:
    order = layers()
    assert len(order) >= 5, "the layer list of CONTRIBUTING.md was not found"
    wrong: list[str] = []
    for path, targets in graph().items():
        layer, entry = place_of(path, order)
        for target in targets:
            target_layer, target_entry = place_of(target, order)
            if target_layer > layer or (target_layer == layer and target_entry != entry):
                wrong.append(
                    f"{path.relative_to(ROOT)} (layer {layer + 1}) imports "
                    f"{target.relative_to(ROOT)} (layer {target_layer + 1})"
                )
    assert not wrong, "imports against the layer order:\n" + "\n".join(sorted(wrong))


def cycles(edges: dict[Path, set[Path]]) -> list[list[Path]]:
    """The import circles: strongly connected components of more than one module."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    found: list[list[Path]] = []

    def visit(node: Path) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[Path] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others() -> None:
    circles = cycles(graph())
    assert not circles, "import circles: " + "; ".join(
        " -> ".join(str(path.relative_to(ROOT)) for path in circle) for circle in circles
    )


def test_the_check_finds_a_circle_and_an_upward_import() -> None:
    a, b, c = Path("a.py"), Path("b.py"), Path("c.py")
    assert [set(circle) for circle in cycles({a: {b}, b: {c}, c: {a}})] == [{a, b, c}]
    assert cycles({a: {b}, b: {c}, c: set()}) == []
    order = layers()
    low, _ = place_of(PACKAGE / "errors.py", order)
    high, _ = place_of(PACKAGE / "scrape" / "coordinator.py", order)
    assert low < high


# What a reader can hold in mind: a module's dependencies and its length, and the number
# of modules of the round's package.
MOST_IMPORTS = 15
MOST_LINES = 450
LONGER = {PACKAGE / "metrics" / "catalog.py"}  # the catalog: one definition after another
MOST_ROUND_MODULES = 8


def test_no_module_depends_on_more_than_fifteen_others() -> None:
    heavy = {
        str(path.relative_to(ROOT)): len(targets)
        for path, targets in graph().items()
        if len(targets) > MOST_IMPORTS
    }
    assert not heavy, f"modules importing more than {MOST_IMPORTS} exporter modules: {heavy}"


def test_no_module_but_the_catalog_is_over_450_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in PACKAGE.rglob("*.py")
        if path not in LONGER
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    }
    assert not long, f"modules over {MOST_LINES} lines: {long}"


def test_the_rounds_package_holds_at_most_eight_modules() -> None:
    modules = sorted(path.name for path in (PACKAGE / "rounds").glob("*.py"))
    assert len(modules) <= MOST_ROUND_MODULES, modules


def test_no_test_imports_the_benchmark() -> None:
    offending = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if re.search(r"^\s*(from|import) bench\b", path.read_text(encoding="utf-8"), re.M)
    ]
    assert not offending


# Where a module's tests are when no test file is named after it or its package.
TESTED_IN = {
    "check.py": "tests/test_cli.py, tests/test_hostile_database.py",
    "errors.py": "tests/unit/test_hostile_answers.py",
    "flags.py": "tests/unit/test_web_settings.py, tests/test_cli.py, tests/test_helm.py",
    "healthcheck.py": "tests/test_cli.py",
    "logs.py": "tests/test_cli.py",
    "timing.py": "tests/unit/test_scrape.py",
}


def test_a_modules_tests_are_found_from_its_name() -> None:
    """`test_<module>*` or `test_<package>*` anywhere under tests/, or TESTED_IN."""
    tests = [path.stem.removeprefix("test_") for path in (ROOT / "tests").rglob("test_*.py")]
    unfound = [
        str(path.relative_to(ROOT))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and str(path.relative_to(PACKAGE)) not in TESTED_IN
        and not any(test.startswith((path.stem, path.parent.name)) for test in tests)
    ]
    assert not unfound, f"no test file is named after these modules or their package: {unfound}"
    for module, places in TESTED_IN.items():
        assert (PACKAGE / module).exists(), module
        for place in places.split(", "):
            assert (ROOT / place).exists(), place
