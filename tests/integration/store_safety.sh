#!/bin/bash
# store_safety.sh - issue 14 §4.4 + §4.7 end to end: a FIFO under an object name is quarantined and SIGTERM still exits 0; HMAC-authenticated objects
# (tests/clients/test_store_safety.py; docs/store.md). Real servers on 127.0.0.1, real store
# directories under a temp dir; the harness always kills the servers.
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_store_safety
