#!/bin/bash
# serve_think_budget.sh - `cinfer serve`: reasoning budgets (Anthropic thinking.budget_tokens, OpenAI reasoning effort) force the end of the reasoning block, with the official SDKs, on the test-only scripted bigram model in its looping-reasoning variant (tests/clients/scripted_bigram_model.py)
# (tests/clients/test_reasoning_budget.py). The Python harness starts the server on a free loopback port and
# always kills it (tests/clients/cinfer_server.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 120 "$VENV/bin/python" -m unittest -v test_reasoning_budget
