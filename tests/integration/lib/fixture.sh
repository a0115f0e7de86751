# fixture.sh - sourced by integration scripts (in lib/ so the tests/integration/*.sh glob does
# not make it a test): the one rule for missing fixtures, as in tests/testutil.h
# tu_missing_fixture. need_fixture PATH...: every PATH must be an existing file, else the script
# exits 1 under CI=true (or 1) and 77 elsewhere (ctest: skipped, SKIP_RETURN_CODE 77).
need_fixture() {
    for f in "$@"; do
        [ -f "$f" ] && continue
        if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
            echo "FAIL: missing fixture: $f (CI=true: fixtures are required)"; exit 1
        fi
        echo "SKIP: missing fixture: $f (exit 77; under CI=true this fails)"; exit 77
    done
}
