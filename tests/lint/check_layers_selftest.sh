#!/usr/bin/env bash
# check_layers_selftest.sh - proves scripts/check-layers.sh rejects violations:
# runs it on small trees in a temp directory (with the real cmake/layers.txt)
# that each break one rule, and on one clean tree. Exit 0 when every verdict is
# right. Registered as ctest check_layers_selftest (label lint).
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d /tmp/cinfer-layers-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0

# tree NAME FILE CONTENT: a tree holding only FILE (under src/ or include/).
tree() {
    local t=$tmp/$1
    mkdir -p "$t/cmake" "$t/src/base" "$t/include/cinfer" "$(dirname "$t/$2")"
    cp "$src/cmake/layers.txt" "$t/cmake/"
    printf '/* test */\n%s\n' "$3" > "$t/$2"
    echo "$t"
}
expect() { # expect ok|fail NAME FILE CONTENT
    local t; t=$(tree "$2" "$3" "$4")
    if bash "$src/scripts/check-layers.sh" "$t" >/dev/null 2>&1; then got=ok; else got=fail; fi
    if [ "$got" = "$1" ]; then echo "ok   $2"; else echo "FAIL $2: expected $1, got $got"; fails=$((fails + 1)); fi
}

expect ok   clean          src/store/a.c       '#include "base/error.h"'
expect ok   same-layer     src/engine/a.c      '#include "engine/sched.h"'
expect ok   public-below   src/engine/a.c      '#include "cinfer/model.h"'
expect fail upward         src/store/a.c       '#include "engine/sched.h"'
expect fail upward-angle   src/model/a.h       '#include <text/tokenizer.h>'
expect fail public-above   src/store/a.c       '#include "cinfer/engine.h"'
expect fail public-src     include/cinfer/model.h '#include "base/error.h"'
expect fail public-unowned include/cinfer/x.h  '#include <stdint.h>'
expect fail escape         src/base/a.c        '#include "../tools/x.h"'
expect fail unknown-layer  src/newlayer/a.c    '#include "base/error.h"'

[ "$fails" -eq 0 ] || { echo "check_layers_selftest: $fails wrong verdict(s)"; exit 1; }
