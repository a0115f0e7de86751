#!/bin/bash
# serve_readme.sh - the curl and Python examples of README.md "Serving" run against a real server,
# and `make run`'s script prints a curl command that works
# (tests/clients/test_serve_readme.py; the harness always kills the server).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_serve_readme
