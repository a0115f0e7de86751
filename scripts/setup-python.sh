#!/usr/bin/env bash
# setup-python.sh - creates the project virtual environment (.venv) for client tests
# and installs tests/clients/requirements.txt into it (from PyPI), if not done already.
# Idempotent: a stamp file records the requirements hash that was installed.
# Prints nothing when up to date. Usage: scripts/setup-python.sh [VENV_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$root/.venv}"
req="$root/tests/clients/requirements.txt"
stamp="$venv/.cinfer-requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "setup-python: creating $venv and installing $(grep -cv '^\s*\(#\|$\)' "$req") packages" >&2
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" || {
  echo "setup-python: pip install failed (is PyPI reachable?)" >&2; exit 1; }
echo "$want" > "$stamp"
