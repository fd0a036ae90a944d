#!/bin/sh
# Installs Debian packages: apt-get update, then install without recommends. Waits for
# another apt or dpkg (a second `make test` installing the same tools at that moment,
# unattended-upgrades) instead of failing on its lock. Arguments: package names.
set -eu
[ "$#" -gt 0 ] || exit 0
if [ "$(id -u)" = 0 ]; then
    as_root() { env DEBIAN_FRONTEND=noninteractive "$@"; }
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root() { sudo -n env DEBIAN_FRONTEND=noninteractive "$@"; }
else
    echo "installing needs root: apt-get install $*" >&2
    exit 1
fi
# Our own runs queue on a file lock; apt waits for dpkg's lock by itself
# (DPkg::Lock::Timeout) but fails at once on the package lists' lock, so another program's
# `apt-get update` is waited out by trying again.
lock="${TMPDIR:-/tmp}/actionscheduler-exporter-apt.lock"
if command -v flock >/dev/null && (: >>"$lock") 2>/dev/null; then
    exec 9>>"$lock"
    flock --wait 900 9
fi
tries=1
until as_root apt-get -o DPkg::Lock::Timeout=600 update -qq; do
    [ "$tries" -lt 24 ] || exit 1
    tries=$((tries + 1))
    sleep 5
done
as_root apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
