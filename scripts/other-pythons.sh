#!/bin/sh
# The fast tier and the database tests on each other Python version this machine has (CI
# runs the whole suite on the default one). A version that is not installed is named and
# skipped. Arguments: versions such as 3.12 3.13.
set -eu

find_python() {
    if "python$1" -c pass 2>/dev/null; then
        echo "python$1"
        return
    fi
    # pyenv keeps versions its shims do not expose while another one is selected.
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    for candidate in "$root"/versions/"$1".*/bin/"python$1"; do
        if [ -x "$candidate" ] && "$candidate" -c pass 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
}

for version in "$@"; do
    python=$(find_python "$version")
    if [ -z "$python" ]; then
        echo "other-pythons: Python $version is not installed here, skipped"
        continue
    fi
    venv=".venv-$version"
    stamp="$venv/.installed-$(cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)"
    if [ ! -f "$stamp" ]; then
        scripts/bootstrap-venv.sh "$python" "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
        rm -f "$venv"/.installed-* && touch "$stamp"
    fi
    echo "other-pythons: Python $version ($python)"
    "$venv/bin/pytest" -q -p no:cacheprovider tests/unit tests/test_queue_states.py \
        tests/test_log_events.py tests/test_exposition.py
done
