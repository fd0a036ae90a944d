#!/bin/sh
# The runtime dependencies at both ends of the ranges pyproject.toml declares: the lowest
# versions allowed (each lower bound exactly) and the newest within the bounds, each in a
# virtualenv of its own, running the tests of what builds on them (HTTP, TLS, the
# connection guard, the configuration). Argument: the Python to use (the lowest supported).
# Word splitting is wanted where lists of requirements and flags are passed:
# shellcheck disable=SC2086
set -eu
python=${1:-python3}
ranges=$("$python" - <<'PY'
import tomllib
with open("pyproject.toml", "rb") as file:
    dependencies = tomllib.load(file)["project"]["dependencies"]
print(" ".join(dependencies))
PY
)
lowest=$(echo "$ranges" | tr ' ' '\n' | sed -n 's/^\([A-Za-z0-9_.-]*\)>=\([^,]*\).*/\1==\2/p')
tests="tests/unit/test_web_settings.py tests/unit/test_config.py tests/test_web_toolkit.py \
tests/test_http.py tests/test_security.py"
pip_flags="--quiet --disable-pip-version-check"
for end in lowest newest; do
    venv=".venv-deps-$end"
    scripts/bootstrap-venv.sh "$python" "$venv"
    if [ "$end" = lowest ]; then
        "$venv/bin/pip" install $pip_flags $lowest pytest
    else
        # The newest each range allows, asked of the index at every run.
        "$venv/bin/pip" install $pip_flags --upgrade --upgrade-strategy eager $ranges pytest
    fi
    "$venv/bin/pip" install $pip_flags --no-deps -e .
    echo "dependency-range: $end:" \
        "$("$venv/bin/pip" freeze | grep -iE '^(fastapi|uvicorn|httptools|starlette|pymysql|pyyaml|bcrypt|prometheus.client)==' | tr '\n' ' ')"
    "$venv/bin/pytest" -q -p no:cacheprovider $tests
done
