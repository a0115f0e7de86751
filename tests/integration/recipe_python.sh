#!/bin/bash
# recipe_python.sh - installs the cinfer_recipe Python extension the way a user would
# (`pip install --no-index --no-build-isolation ./python` into a fresh temporary venv:
# offline, stdlib venv only) and runs tests/python/test_recipe.py with unittest.
# Needs python3 with the venv module and libjansson-dev.
set -u
SRC=${CINFER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d /tmp/cinfer-recipe-py.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv" || { echo "FAIL python3 -m venv"; exit 1; }
if ! "$tmp/venv/bin/pip" install -q --no-index --no-build-isolation "$SRC/python" >"$tmp/install.log" 2>&1; then
    echo "FAIL pip install ./python"; cat "$tmp/install.log"; exit 1
fi
cd "$tmp" && "$tmp/venv/bin/python" "$SRC/tests/python/test_recipe.py" -v 2>&1 | tail -40
exit "${PIPESTATUS[0]}"
