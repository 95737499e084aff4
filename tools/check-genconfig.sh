#!/usr/bin/env bash
# Fail when etc/mlaccel.conf.sample no longer matches the options in code.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
oslo-config-generator --config-file etc/oslo-config-generator/mlaccel.conf \
    --output-file "$tmp"
if ! diff -u etc/mlaccel.conf.sample "$tmp"; then
    echo "etc/mlaccel.conf.sample is stale: run 'tox -e genconfig'." >&2
    exit 1
fi
echo "etc/mlaccel.conf.sample is up to date."
