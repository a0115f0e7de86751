#!/bin/bash
# router_resume.sh - mid-stream resume through `cinfer router`: two real workers, the one serving a
# stream SIGKILLed after the client (openai / anthropic SDKs) got its first chunks; the client's greedy
# text equals an uninterrupted run for Chat, Completions, Messages and Responses streams; bad
# cinfer.resume ids are a 400; a cut after every resume mark (tool call, reasoning, stop string) replays
# exactly (tests/clients/test_router_resume.py). The harnesses kill what they started.
set -u
here=$(cd "$(dirname "$0")" && pwd)
VENV=${CINFER_VENV:-$here/../../.venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "FAIL: no Python venv at $VENV (run scripts/setup-python.sh or make test)"; exit 1
fi
cd "$here/../clients" && exec timeout 200 "$VENV/bin/python" -m unittest -v test_router_resume
