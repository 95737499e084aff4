#!/usr/bin/env bash
# Install the system packages bindep.txt lists for the given profile that
# are missing. Needs root and apt-get; elsewhere it only names them.
set -eu
cd "$(dirname "$0")/.."
profile=${1:-test}
missing=$(bindep -b "$profile" || true)
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "Missing system packages (install them): $missing" >&2
    exit 1
fi
echo "Installing system packages: $missing"
apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
