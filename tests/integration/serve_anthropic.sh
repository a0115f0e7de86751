#!/bin/bash
# serve_anthropic.sh - `cinfer serve`: Anthropic Messages API (/v1/messages, count_tokens) driven by the official anthropic SDK on stories260K
# (tests/clients/test_anthropic_messages.py). The Python harness starts the server on a free loopback port and
# always kills it (tests/clients/cinfer_server.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_anthropic_messages
