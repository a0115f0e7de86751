#!/bin/bash
# serve_store.sh - `cinfer serve --kv-store DIR`: a prompt prefix computed before a restart is
# loaded from the persistent store after it (cached_tokens, metrics, identical greedy output)
# (tests/clients/test_serve_store.py; the harness always kills the server).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_serve_store
