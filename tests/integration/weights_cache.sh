#!/bin/bash
# weights_cache.sh - the repacked-weights cache from the command line (issue 25), on a Q8_0
# llama made by `cinfer mkmodel` at test time:
#   - `cinfer run --temp 0` prints the same text without a cache, on a miss (the file is written
#     into the cache directory) and on a hit;
#   - two `cinfer serve --weights-cache` processes on one host map the same cache file and share
#     its pages: per process, Pss of the cache mapping (/proc/PID/smaps) is about half its Rss,
#     and the two Pss add up to about one copy; the summary says where the weights come from;
#     their greedy answers to the same request are identical;
#   - a corrupt cache file is rejected with one log line and rebuilt, and the server serves;
#   - a small deepseek2 model (MLA + MoE) gives the same text without a cache, on a miss and a hit;
#   - --help of serve and run documents --weights-cache.
set -u
BIN=${CINFER_BIN:?CINFER_BIN not set}
SHARED=${CINFER_SHARED:-$(dirname "$0")/../../../shared}
. "$(dirname "$0")/lib/fixture.sh"
V=$SHARED/models/stories260K.gguf
need_fixture "$V"
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
fail=0
check() { # name, expected, actual
    if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
contains() { # name, needle, haystack
    case "$3" in *"$2"*) echo "ok   $1" ;; *) echo "FAIL $1: [$2] not in [$3]"; fail=1 ;; esac
}
# start NAME ARGS...: serve on a free port; waits for the URL line; sets PID and PORT
start() {
    local name=$1; shift
    : >"$T/$name.log"
    "$BIN" serve "$M" --port 0 --ctx 128 -t 1 --kv-memory 0.01 --weights-cache "$C" "$@" 2>"$T/$name.log" &
    PID=$!
    PIDS+=($PID)
    for _ in $(seq 300); do
        PORT=$(sed -n 's|.*URL  *http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$T/$name.log")
        [ -n "$PORT" ] && return 0
        kill -0 $PID 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# cache_kb PID FIELD: FIELD (Rss, Pss) of the process's mappings of the cache file, in kB
cache_kb() {
    awk -v f="$2:" '/^[0-9a-f]+-[0-9a-f]+ / { in_c = ($NF ~ /\.cwc$/) } in_c && $1 == f { s += $2 } END { print s + 0 }' \
        "/proc/$1/smaps"
}
ask() { # PORT: a greedy completion
    curl -s -m 20 "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}' | sed 's/"id":"[^"]*"//; s/"created":[0-9]*//'
}

M=$T/m.gguf
C=$T/cache
"$BIN" mkmodel --arch llama --dim 1024 --layers 4 --heads 8 --kv-heads 8 --ffn 2816 --vocab-from "$V" \
    --dtype q8_0 --seed 3 --ctx 256 "$M" 2>"$T/mk.log" || { echo "FAIL mkmodel"; cat "$T/mk.log"; exit 1; }

# greedy text: no cache, miss, hit
run() { "$BIN" run -m "$M" -p "Once upon a time" -n 16 --temp 0 -t 1 "$@" 2>>"$T/run.log"; }
plain=$(run)
miss=$(run --weights-cache "$C")
n=$(ls "$C"/*.cwc 2>/dev/null | wc -l)
check cache-file-written 1 "$n"
hit=$(run --weights-cache "$C")
check run-miss-same "$plain" "$miss"
check run-hit-same "$plain" "$hit"

# two servers share the cache file's pages
start a || { echo "FAIL start a"; cat "$T/a.log"; exit 1; }
PA=$PID; PORTA=$PORT
start b || { echo "FAIL start b"; cat "$T/b.log"; exit 1; }
PB=$PID; PORTB=$PORT
contains summary-source "serve: weights from cache $C/" "$(cat "$T/a.log")"
contains summary-memory "repacked/stacked (cache, shared)" "$(cat "$T/a.log")"
sleep 0.3
ra=$(cache_kb $PA Rss); pa=$(cache_kb $PA Pss); rb=$(cache_kb $PB Rss); pb=$(cache_kb $PB Pss)
size_kb=$(du -k "$C"/*.cwc | cut -f1) # allocated: the 2 MiB alignment leaves holes
echo "     cache file ${size_kb} kB allocated; a: Rss ${ra} Pss ${pa} kB; b: Rss ${rb} Pss ${pb} kB"
echo "     smaps_rollup a: $(grep -E '^(Rss|Pss|Pss_File|Pss_Anon):' /proc/$PA/smaps_rollup | tr -s ' \n' ' ')"
echo "     smaps_rollup b: $(grep -E '^(Rss|Pss|Pss_File|Pss_Anon):' /proc/$PB/smaps_rollup | tr -s ' \n' ' ')"
# each maps (nearly) the whole file; together they hold one copy: Pss a + Pss b ~ Rss of one
[ "$ra" -gt $((size_kb * 9 / 10)) ] && [ "$rb" -gt $((size_kb * 9 / 10)) ] && echo "ok   cache-mapped" ||
    { echo "FAIL cache-mapped"; fail=1; }
both=$((pa + pb)); hi=$((ra > rb ? ra : rb))
[ "$both" -le $((hi * 11 / 10)) ] && [ "$pa" -le $((ra * 6 / 10)) ] && echo "ok   pages-shared (Pss a+b ${both} kB)" ||
    { echo "FAIL pages-shared: Pss a+b ${both} kB, Rss ${ra}/${rb} kB"; fail=1; }
ans=$(ask $PORTA)
contains serve-answer '"text":' "$ans"
check serve-same-answer "$ans" "$(ask $PORTB)"
kill $PA $PB; wait $PA $PB 2>/dev/null

# a corrupt cache: one log line, rebuilt, served
f=$(ls "$C"/*.cwc)
printf '\x5a' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc status=none
start c || { echo "FAIL start c"; cat "$T/c.log"; exit 1; }
check corrupt-one-line 1 "$(grep -c 'rejected: ' "$T/c.log")"
contains corrupt-reason "fails its checksum; rebuilding it" "$(cat "$T/c.log")"
contains corrupt-summary "repacked and written to cache" "$(cat "$T/c.log")"
curl -s -m 10 "http://127.0.0.1:$PORT/health" >/dev/null && echo "ok   corrupt-serves" || { echo "FAIL corrupt-serves"; fail=1; }
kill $PID; wait $PID 2>/dev/null
check after-rebuild-same "$plain" "$(run --weights-cache "$C")"

# deepseek2 (MLA + MoE: stacked expert gate|up, f32 attn_kv_b copies): the same text three ways
D=$T/ds.gguf
"$BIN" mkmodel --arch deepseek2 --dim 256 --layers 3 --heads 4 --ffn 512 --kv-lora 64 --qk-nope 32 \
    --qk-rope 32 --v-head 32 --experts 8 --experts-used 2 --expert-ffn 128 --shared-experts 1 --dense-layers 1 \
    --gating softmax --ctx 256 --vocab-from "$V" --dtype q8_0 --seed 1 "$D" 2>"$T/mk.log" ||
    { echo "FAIL mkmodel deepseek2"; cat "$T/mk.log"; exit 1; }
drun() { "$BIN" run -m "$D" -p "Once upon a time" -n 12 --temp 0 -t 1 "$@" 2>>"$T/run.log"; }
dplain=$(drun)
check ds-miss-same "$dplain" "$(drun --weights-cache "$T/dscache")"
check ds-hit-same "$dplain" "$(drun --weights-cache "$T/dscache")"

contains serve-help "--weights-cache DIR" "$("$BIN" serve --help 2>&1)"
contains run-help "--weights-cache DIR" "$("$BIN" run --help 2>&1)"
exit $fail
