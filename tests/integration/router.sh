#!/bin/bash
# router.sh - `cinfer router` in front of real `cinfer serve` workers on loopback with the official SDKs:
# identical outputs through the router for Chat, Messages and Responses (streamed and not, tool calls),
# each placement policy's choices, a killed worker, a full worker, SIGTERM drain and a router restart
# (tests/clients/test_router.py). The harnesses always kill what they started.
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 300 "$VENV/bin/python" -m unittest -v test_router
