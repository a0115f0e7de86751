#!/bin/bash
# bench_safety.sh - the bench/ programs are safe to try: every bench binary
# (build/bench_*, next to $CINFER_BIN) and every bench/*.sh answers --help
# and -h with a usage that names it (exit 0) and an unknown flag with one
# line and exit 2, touching nothing; bench_store writes only into a scratch
# directory it makes under the directory it is given, removes only that, so
# a sentinel file there survives and nothing is left behind -- also for a
# name holding a quote and a `;` (no shell ever sees it).
set -u
BIN=${CINFER_BIN:?CINFER_BIN not set}
BUILD=$(cd "$(dirname "$BIN")" && pwd)
SRC=${CINFER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d /tmp/cinfer-bench-safety-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # name, expected, actual
    if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}

# help_and_bad_flag NAME CMD...: --help / -h exit 0 naming NAME; unknown flags exit 2 with one line
help_and_bad_flag() {
    local name=$1; shift
    for h in --help -h; do
        "$@" "$h" >"$T/out" 2>"$T/err"; check "$name $h rc" 0 $?
        grep -q "usage:.*$name" "$T/out"; check "$name $h names itself" 0 $?
    done
    for bad in --no-such-flag-xyz -Q; do
        (cd "$T/cwd" && "$@" "$bad" >"$T/out" 2>"$T/err"); check "$name $bad rc" 2 $?
        check "$name $bad stderr lines" 1 "$(wc -l <"$T/err")"
        check "$name $bad stdout empty" 0 "$(wc -c <"$T/out")"
        check "$name $bad touched nothing" "" "$(ls -A "$T/cwd")"
    done
}

mkdir -p "$T/cwd"
nbench=0
for src in "$SRC"/bench/bench_*.c; do
    name=$(basename "$src" .c)
    if [ ! -x "$BUILD/$name" ]; then echo "FAIL $name: $BUILD/$name not built"; fail=1; continue; fi
    help_and_bad_flag "$name" "$BUILD/$name"
    nbench=$((nbench + 1))
done
check "bench binaries found" 1 "$([ "$nbench" -ge 5 ] && echo 1 || echo 0)"
for sh in "$SRC"/bench/*.sh; do
    help_and_bad_flag "$(basename "$sh")" bash "$sh"
done

# bench_store against a directory holding other data: only its own scratch dir comes and goes
for parent in "$T/store" "$T/it's; touch $T/pwned; echo"; do
    mkdir -p "$parent"
    echo "precious" >"$parent/SENTINEL"
    mkdir "$parent/objects" && echo "also precious" >"$parent/objects/keep"
    timeout 120 "$BUILD/bench_store" -n 8 -s stories "$parent" >"$T/out" 2>"$T/err"; check "bench_store run rc" 0 $?
    grep -q "^warm sync/block" "$T/out"; check "bench_store measured" 0 $?
    check "sentinel kept" "precious" "$(cat "$parent/SENTINEL" 2>&1)"
    check "store-like content kept" "also precious" "$(cat "$parent/objects/keep" 2>&1)"
    check "nothing left behind" "SENTINEL objects" "$(ls "$parent" | tr '\n' ' ' | sed 's/ $//')"
    "$BUILD/bench_store" --blocks=8 --bogus "$parent" >/dev/null 2>&1; check "bench_store bad flag rc" 2 $?
    check "bad flag left dir alone" "SENTINEL objects" "$(ls "$parent" | tr '\n' ' ' | sed 's/ $//')"
done
check "no shell ran the name" "no" "$([ -e "$T/pwned" ] && echo yes || echo no)"

# default parent is $TMPDIR; a missing parent is an error (exit 1) that creates nothing
mkdir -p "$T/tmpdir"
TMPDIR="$T/tmpdir" timeout 120 "$BUILD/bench_store" -n 8 -s stories >/dev/null 2>&1; check "TMPDIR run rc" 0 $?
check "TMPDIR scratch removed" "" "$(ls -A "$T/tmpdir")"
"$BUILD/bench_store" -n 8 -s stories "$T/missing" >/dev/null 2>"$T/err"; check "missing parent rc" 1 $?
check "missing parent not created" "no" "$([ -e "$T/missing" ] && echo yes || echo no)"

exit $fail
