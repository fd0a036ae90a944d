#!/bin/sh
# The runtime dependencies at both ends of the ranges pyproject.toml declares: the lowest
# versions allowed (each lower bound exactly) and the newest within the bounds, each in a
# virtualenv of its own, running the tests of what builds on them (HTTP, TLS, the
# connection guard, the configuration). Argument: the Python to use (the lowest supported).
# Word splitting is wanted where lists of requirements and flags are passed:
# shellcheck disable=SC2086
set -eu
python=${1:-python3}
# Requirement files, not words: a requirement with an environment marker has spaces.
requirements=$(mktemp -d)
trap 'rm -rf "$requirements"' EXIT
"$python" - "$requirements" <<'PY'
import re
import sys
import tomllib
from pathlib import Path

with open("pyproject.toml", "rb") as file:
    dependencies = tomllib.load(file)["project"]["dependencies"]
folder = Path(sys.argv[1])
(folder / "newest.txt").write_text("\n".join(dependencies) + "\n")
lowest = []
for dependency in dependencies:
    spec, semicolon, marker = dependency.partition(";")
    bound = re.match(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([^,\s]+)", spec)
    if bound:  # each lower bound exactly, under the same marker
        lowest.append(f"{bound[1]}=={bound[2]}" + (f";{marker}" if semicolon else ""))
(folder / "lowest.txt").write_text("\n".join(lowest) + "\n")
PY
tests="tests/unit/test_web_settings.py tests/unit/test_config.py tests/test_web_toolkit.py \
tests/test_http.py tests/test_security.py"
pip_flags="--quiet --disable-pip-version-check"
for end in lowest newest; do
    venv=".venv-deps-$end"
    scripts/bootstrap-venv.sh "$python" "$venv"
    if [ "$end" = lowest ]; then
        "$venv/bin/pip" install $pip_flags -r "$requirements/lowest.txt" pytest
    else
        # The newest each range allows, asked of the index at every run.
        "$venv/bin/pip" install $pip_flags --upgrade --upgrade-strategy eager \
            -r "$requirements/newest.txt" pytest
    fi
    "$venv/bin/pip" install $pip_flags --no-deps -e .
    echo "dependency-range: $end:" \
        "$("$venv/bin/pip" freeze | grep -iE '^(fastapi|uvicorn|httptools|starlette|pymysql|pyyaml|bcrypt|isal|prometheus.client)==' | tr '\n' ' ')"
    "$venv/bin/pytest" -q -p no:cacheprovider $tests
done
