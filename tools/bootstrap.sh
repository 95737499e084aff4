#!/usr/bin/env bash
# Make (once) and print the path of a private virtualenv holding the tools the
# project's commands run: tox and bindep. It never installs into the system's
# Python, so it works with a distribution's PEP 668 "externally managed"
# python3. The virtualenv lives in .tox/bootstrap (git ignores it).
#   tools/bootstrap.sh          -> prints the virtualenv's bin directory
set -eu
cd "$(dirname "$0")/.."
venv=.tox/bootstrap
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/tox" ] || [ ! -x "$venv/bin/bindep" ]; then
    if ! "$python" -m venv --help >/dev/null 2>&1 || \
       ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
        # Debian and Ubuntu ship venv's ensurepip in its own package.
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "bootstrap: installing python3-venv" >&2
            apt-get update -qq >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
        else
            echo "bootstrap: $python has no venv module; install python3-venv" >&2
            exit 1
        fi
    fi
    echo "bootstrap: making $venv with tox and bindep" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet 'tox>=4.6' 'bindep>=2.11.0' >&2
fi
echo "$PWD/$venv/bin"
