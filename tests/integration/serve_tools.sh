#!/bin/bash
# serve_tools.sh - `cinfer serve`: tool calls and reasoning in Chat, Messages and Responses with the official SDKs, on the test-only scripted bigram model (tests/clients/scripted_bigram_model.py)
# (tests/clients/test_tool_calls.py). The Python harness starts the server on a free loopback port and
# always kills it (tests/clients/cinfer_server.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_tool_calls
