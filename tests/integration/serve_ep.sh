#!/bin/bash
# serve_ep.sh - expert parallelism: `mpirun -n 2|4 cinfer serve --ep` on the tiny DeepSeek-V2 model gives
# the single-process server's greedy outputs (batched, prefix-cached, across live rebalances that move
# expert weights, with dual-batch overlap, deepseek2 and deepseek4), each rank holds only its experts, a
# killed rank fails the job fast and the router in front answers 503 until a restart
# (tests/clients/test_serve_ep.py). Skips (77) without mpirun outside CI.
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 600 "$VENV/bin/python" -m unittest -v test_serve_ep
