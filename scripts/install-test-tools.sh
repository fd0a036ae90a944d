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

echo "installing Debian packages:$missing"
# shellcheck disable=SC2086 # the package list is meant to split
scripts/apt-install.sh $missing
