#!/bin/bash
# serve_swa_ds4.sh - `cinfer serve` on an mkmodel deepseek4: bounded replay is its default resume of a
# prefix hit without window state (tests/clients/test_serve_swa_ds4.py). The Python harness starts
# the server on a free loopback port and always kills it (tests/clients/cinfer_server.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_serve_swa_ds4
