#!/bin/sh
# Creates the virtualenv; on Debian/Ubuntu, installs python3-venv first when it is missing.
set -eu
python=$1
venv=$2
if [ -x "$venv/bin/python" ]; then
    exit 0
fi
if ! "$python" -m venv "$venv" 2>/dev/null; then
    rm -rf "$venv"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
        "$(dirname "$0")/apt-install.sh" "python$version-venv" \
            || "$(dirname "$0")/apt-install.sh" python3-venv
        "$python" -m venv "$venv"
    else
        echo "cannot create a virtualenv: install python3-venv (apt-get install python3-venv)" >&2
        exit 1
    fi
fi
