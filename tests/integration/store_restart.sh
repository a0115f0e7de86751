#!/bin/bash
# store_restart.sh - issue 8 end-to-end test of the persistent KV store through `cinfer serve`
# (tests/clients/test_store_restart.py; docs/store.md). Real servers on 127.0.0.1, real store
# directories under a temp dir; the harness always kills the servers.
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_store_restart
