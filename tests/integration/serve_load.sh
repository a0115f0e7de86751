#!/bin/bash
# serve_load.sh - bounded load test: 64 concurrent streaming openai-SDK clients x 4 requests;
# 0 errors, complete outputs, bounded server RSS; prints requests/s and tok/s
# (tests/clients/test_serve_load.py; the harness always kills the server).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_serve_load
