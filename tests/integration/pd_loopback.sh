#!/bin/bash
# pd_loopback.sh - issue 19: a prefill worker, a decode worker and a monolithic server on
# 127.0.0.1 (UCX's default transport selection), greedy outputs identical through the handoff
# (tests/clients/test_pd.py; docs/pd.md), and with window state handed off on tiny-gemma2 and a
# deepseek4 mkmodel (tests/clients/test_pd_window.py). The harness always kills the servers.
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 300 "$VENV/bin/python" -m unittest -v test_pd test_pd_window
