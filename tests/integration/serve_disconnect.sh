#!/bin/bash
# serve_disconnect.sh - client disconnects cancel engine requests and free KV blocks; slow readers
# length with the numbers) has its status and OpenAI's error shape, and the server keeps serving
# (tests/clients/test_serve_disconnect.py; the harness always kills the server).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_serve_disconnect
