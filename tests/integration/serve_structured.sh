#!/bin/bash
# serve_structured.sh - `cinfer serve`: structured outputs (response_format, text.format, output_config.format,
# forced and strict tool calls, guided_* / structured_outputs) with the official SDKs on tiny-llama, every
# output validated with jsonschema (tests/clients/test_structured.py). The Python harness starts the server
# on a free loopback port and always kills it (tests/clients/cinfer_server.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 300 "$VENV/bin/python" -m unittest -v test_structured
