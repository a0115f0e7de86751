#!/bin/bash
# serve_openapi.sh - docs/openapi.yaml against a live `cinfer serve` on stories260K: schemathesis (pinned in
# tests/clients/requirements.txt) finds no server error, and every status, content type and body (SSE events
# included) matches the spec, with --api-key sent as Bearer and as x-api-key; the server survives
# (tests/clients/test_serve_openapi.py; the harness always kills the server).
# A missing model skips (exit 77), except under CI=true, where it fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
SHARED=${CINFER_SHARED:-$here/../../../shared}
if [ ! -f "$SHARED/models/stories260K.gguf" ]; then
    if [ "${CI:-}" = true ]; then echo "FAIL: fixture $SHARED/models/stories260K.gguf is missing"; exit 1; fi
    echo "SKIP: fixture $SHARED/models/stories260K.gguf is missing"; exit 77
fi
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
if [ ! -x "$VENV/bin/schemathesis" ]; then
    echo "FAIL: schemathesis is not installed in $VENV (run scripts/setup-python.sh: tests/clients/requirements.txt)"; exit 1
fi
cd "$here/../clients" && exec timeout 600 "$VENV/bin/python" -m unittest -v test_serve_openapi
