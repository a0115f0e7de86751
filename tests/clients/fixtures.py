"""fixtures.py - the one rule for missing fixtures in the Python client tests
(the same as tests/testutil.h tu_missing_fixture): a test never passes for lack
of its input. Under CI=true (or 1) a missing fixture fails the run (exit 1);
elsewhere the run exits 77, which ctest reports as skipped (SKIP_RETURN_CODE 77
in CMakeLists.txt). Called at import time, so the whole suite stops before any
test runs.
"""
import os
import sys


def in_ci():
    return os.environ.get("CI", "") in ("true", "1")


def require(path, what="fixture"):
    """Exits the process (1 under CI, else 77) unless path is an existing file."""
    if os.path.isfile(path):
        return
    if in_ci():
        sys.stderr.write("FAIL: missing %s: %s (CI=true: fixtures are required)\n" % (what, path))
        sys.exit(1)
    sys.stderr.write("SKIP: missing %s: %s (exit 77; under CI=true this fails)\n" % (what, path))
    sys.exit(77)
