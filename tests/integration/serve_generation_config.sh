#!/bin/bash
# serve_generation_config.sh - `cinfer serve DIR`: generation_config.json sampling defaults and EOS ids applied to requests that set none (tests/clients/test_generation_config.py, official openai SDK, tiny HF llama fixture).
# (tests/clients/test_generation_config.py). The Python harness starts the server on a free loopback port and
# always kills it (tests/clients/cinfer_server.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_generation_config
