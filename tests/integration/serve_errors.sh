#!/bin/bash
# serve_errors.sh - every documented error of `cinfer serve` (400/401/404/405/413/429, context
# length with the numbers) has its status and OpenAI's error shape, and the server keeps serving
# after each (tests/clients/test_serve_errors.py; the harness always kills the server).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_serve_errors
