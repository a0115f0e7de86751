#!/bin/bash
# serve_netsec.sh - `cinfer serve` against hostile clients (issue 14 section 4): header / body /
# idle timeouts (slowloris), --max-connections refusal, running out of file descriptors (no
# busy loop, bounded log), stored responses and the prefix cache isolated per API key, no log
# injection (tests/clients/test_serve_netsec.py; loopback only, every server is killed at exit).
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
SHARED=${CINFER_SHARED:-$here/../../../shared}
if [ ! -f "$SHARED/models/stories260K.gguf" ]; then
    echo "SKIP: no $SHARED/models/stories260K.gguf"
    [ "${CI:-}" = "true" ] && exit 1
    exit 77
fi
cd "$here/../clients" && exec timeout 240 "$VENV/bin/python" -m unittest -v test_serve_netsec
