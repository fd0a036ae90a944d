#!/bin/sh
# Installs the Debian packages the tests run for real: prometheus and promtool (package
# prometheus), Alertmanager (package prometheus-alertmanager), shellcheck, PHP (for the
# chart's must-use plugin), and podman with runc and debootstrap (to build and run the image).
set -eu
missing=""
command -v promtool >/dev/null || missing="$missing prometheus"
command -v prometheus-alertmanager >/dev/null || missing="$missing prometheus-alertmanager"
command -v shellcheck >/dev/null || missing="$missing shellcheck"
command -v php >/dev/null || missing="$missing php-cli"
command -v podman >/dev/null || missing="$missing podman"
command -v runc >/dev/null || missing="$missing runc"
command -v debootstrap >/dev/null || missing="$missing debootstrap"
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    sudo=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
else
    echo "The tests need:$missing (Debian packages). Install them: apt-get install$missing" >&2
    exit 1
fi
echo "installing Debian packages:$missing"
$sudo apt-get update -qq
# shellcheck disable=SC2086 # the package list is meant to split
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
