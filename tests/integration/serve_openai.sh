#!/bin/bash
# serve_openai.sh - `cinfer serve` on stories260K driven by the official openai Python SDK
# (tests/clients/test_openai_chat.py): chat, streaming, completions, n, stop, seed, cached_tokens,
# logprobs, models, tokenize. The Python harness starts the server on a free loopback port and
# always kills it (tests/clients/cinfer_server.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_openai_chat
