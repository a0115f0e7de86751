#!/usr/bin/env bash
# bench/mla_longctx.sh - long-context prefill of MLA (deepseek2, V3-shaped) in one run:
#   1. this build against a baseline cinfer binary (BASE_BIN, e.g. main's build) on the same
#      V3-shaped 2-layer Q8_0 model (bench/deepseek4.sh section 3's shape: kv-lora 512 + rope 64,
#      16 heads of 128 + 64 query/key and 128 value), and llama.cpp (llama-bench -fa 1) on the same
#      file as the peer;
#   2. issue 15's comparison: time per token of deepseek4 (CSA + HCA, 2 layers) against the
#      V3-shaped MLA model at each length, with both models' KV bytes per token.
# Every cinfer line is `bench latency -r 1 -b BATCH -p N -n 4` (BATCH defaults to N); the `cpu` line (process CPU time / threads)
# is the figure to compare on this shared machine, the wall rates are printed too.
set -euo pipefail
usage="usage: bench/mla_longctx.sh [OUT.txt]
env: LONG (default '4096 8192'), BATCH (tokens per forward call, default the length),
     BASE_BIN (baseline cinfer; empty: none), BASE_MAX (longest length the baseline runs, default 4096),
     PEER_LENS (lengths llama-bench runs, default '4096'),
     THREADS (2), LLAMA_BENCH (default /work/llama/build/bin/llama-bench; empty: none),
     CINFER_BIN, MODELS (default build/bench-models), VOCAB (default \$CINFER_SHARED/models/stories260K.gguf)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "mla_longctx.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/dev/null}
bin=${CINFER_BIN:-$root/build/cinfer}
base=${BASE_BIN-}
llama=${LLAMA_BENCH-/work/llama/build/bin/llama-bench}
models=${MODELS:-$root/build/bench-models}
vocab=${VOCAB:-${CINFER_SHARED:-$root/../shared}/models/stories260K.gguf}
t=${THREADS:-2}
[ -f "$vocab" ] || { echo "mla_longctx.sh: no vocabulary '$vocab'" >&2; exit 2; }
mkdir -p "$models"
run() { echo "\$ $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"; "$@" 2>&1 | grep -E '^(model|machine|prefill|decode|cpu|cinfer: KV|llama-bench|\|)' || true; echo; }
. "$root/bench/lib/long_models.sh"
kv_line() { "$bin" run -m "$1" -p "Once upon a time" -n 1 --temp 0 -c 256 2>&1 | grep -E '^cinfer: KV' || true; }
{
  echo "# bench/mla_longctx.sh ($(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
  echo "# this build: $bin; baseline: ${base:-none}"
  m=$(long_mla) d=$(long_ds4)
  kv_line "$m"
  kv_line "$d"
  for n in ${LONG-4096 8192}; do
    echo "## $n tokens"
    if [ -n "$base" ] && [ "$n" -le "${BASE_MAX:-4096}" ]; then
      echo "# baseline, V3-shaped MLA"
      run "$base" bench latency -m "$m" -t "$t" -r 1 -b "${BATCH:-$n}" -p "$n" -n 4
    fi
    echo "# this build, V3-shaped MLA"
    run "$bin" bench latency -m "$m" -t "$t" -r 1 -b "${BATCH:-$n}" -p "$n" -n 4
    echo "# this build, deepseek4"
    run "$bin" bench latency -m "$d" -t "$t" -r 1 -b "${BATCH:-$n}" -p "$n" -n 4
    if [ -n "$llama" ] && [[ " ${PEER_LENS-4096} " == *" $n "* ]]; then
      echo "# llama.cpp, V3-shaped MLA"
      run /usr/bin/time -f 'llama-bench: %e s wall, %U s user' "$llama" -m "$m" -t "$t" -r 1 --repack 0 -fa 1 -p "$n" -n 0
    fi
  done
} | tee "$out"
