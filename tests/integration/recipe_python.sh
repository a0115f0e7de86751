#!/bin/bash
# recipe_python.sh - builds the cinfer_recipe Python extension (python/setup.py) from the
# recipe C sources into a temporary directory and runs tests/python/test_recipe.py with
# the stdlib unittest runner. Offline: needs only python3 with setuptools and libjansson-dev.
set -u
SRC=${CINFER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=python3
if [ -x "${CINFER_VENV:-}/bin/python" ]; then PY="$CINFER_VENV/bin/python"; fi
"$PY" -c "import setuptools" 2>/dev/null || PY=python3
tmp=$(mktemp -d /tmp/cinfer-recipe-py.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$SRC" && CINFER_SRC="$SRC" "$PY" python/setup.py -q build_ext --build-lib "$tmp/lib" --build-temp "$tmp/build" \
      >"$tmp/build.log" 2>&1); then
    echo "FAIL build of the extension"; cat "$tmp/build.log"; exit 1
fi
PYTHONPATH="$tmp/lib" "$PY" -m unittest -v "$SRC/tests/python/test_recipe.py" 2>&1 | tail -40
exit "${PIPESTATUS[0]}"
