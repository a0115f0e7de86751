#!/bin/bash
# serve_swa.sh - `cinfer serve` on tiny-gemma2: window-state tier and bounded replay in usage and metrics
# (tests/clients/test_serve_swa.py). The Python harness starts the server on a free loopback port and
# always kills it (tests/clients/cinfer_server.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_serve_swa
