"""Issue 39, item 6: the runtime dependencies are declared in ranges that `make test`
tests at both ends (scripts/dependency-range.sh), bounded above where internals are
used, and the pinned versions lie inside them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_RANGE = re.compile(r"^([A-Za-z0-9_.-]+)>=([0-9.]+),<([0-9.]+)(\s*;.*)?$")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_every_runtime_dependency_has_a_tested_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {
        name.lower().replace("_", "-"): version
        for name, _, version in (
            line.partition("==")
            for line in (ROOT / "constraints.txt").read_text().splitlines()
            if "==" in line
        )
    }
    ranges = {}
    for requirement in project["dependencies"]:
        found = _RANGE.match(requirement)
        assert found, f"{requirement}: give a range, >=lowest,<bound"
        name, lowest, bound = found.group(1).lower(), found.group(2), found.group(3)
        ranges[name] = (lowest, bound)
        pinned = pins[name.replace("_", "-")]
        assert _version(lowest) <= _version(pinned) < _version(bound), (name, pinned)
    # The guard subclasses uvicorn's HttpToolsProtocol: bounded by the minor version tested.
    lowest, bound = ranges["uvicorn"]
    assert _version(bound)[:2] == (
        _version(pins["uvicorn"])[0],
        _version(pins["uvicorn"])[1] + 1,
    ), "uvicorn's upper bound is the next minor version after the one tested"
    makefile = (ROOT / "Makefile").read_text()
    # `make test`: the target and its recipe, up to the next blank line
    test_target = re.search(r"^test:.*?(?:\n\n|\Z)", makefile, flags=re.MULTILINE | re.DOTALL)
    assert test_target and "dependency-ranges" in test_target.group(0)
