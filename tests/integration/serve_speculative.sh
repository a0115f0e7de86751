#!/bin/bash
# serve_speculative.sh - speculative decoding through `cinfer serve` with the OpenAI SDK: greedy
# answers identical with every drafter, usage and /metrics counts, invalid options
# (tests/clients/test_serve_speculative.py; the harness always kills the server).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 300 "$VENV/bin/python" -m unittest -v test_serve_speculative
