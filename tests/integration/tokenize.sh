#!/bin/bash
# tokenize.sh - `cinfer tokenize` end to end on stories260K (ids match the
# llama.cpp fixture), output modes, and exit codes for bad input.
set -u
BIN=${CINFER_BIN:?CINFER_BIN not set}
SHARED=${CINFER_SHARED:-$(dirname "$0")/../../../shared}
M=$SHARED/models/stories260K.gguf
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$BIN" "$M"
fail=0
check() { # name, expected, actual
    if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
check ids "[1, 403, 407, 261, 378]" "$("$BIN" tokenize -m "$M" --ids "Once upon a time")"
check no-bos "[403, 407, 261, 378]" "$("$BIN" tokenize -m "$M" --ids --no-bos "Once upon a time")"
check table "$(printf "1\t'<s>'\n403\t' Once'")" "$("$BIN" tokenize -m "$M" "Once")"
check pieces "' Once'" "$("$BIN" tokenize -m "$M" --pieces --no-bos "Once")"
check special "[1, 1]" "$("$BIN" tokenize -m "$M" --ids --parse-special "<s>")"
"$BIN" tokenize -m "$SHARED/does-not-exist.gguf" x >/dev/null 2>&1; check missing-model-rc 1 $?
"$BIN" tokenize x >/dev/null 2>&1; check no-model-rc 2 $?
"$BIN" tokenize -m "$M" --frobnicate x >/dev/null 2>&1; check bad-flag-rc 2 $?
"$BIN" tokenize --help | grep -q -- --parse-special; check help 0 $?
exit $fail
