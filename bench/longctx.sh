#!/usr/bin/env bash
# bench/longctx.sh - long-context prefill and decode, cinfer next to llama.cpp (llama-bench -fa 1)
# in one run, case by case (the machine is shared and noisy: compare within a case, not across
# runs). Cases (PREFILL and DEPTH lists, env):
#   prefill P  : cinfer bench latency -p P -n 1            | llama-bench -p P -n 0 -fa 1
#   decode @ D : cinfer bench latency -d D -p 0 -n GEN     | llama-bench -p 0 -n GEN -d D -fa 1
# cinfer prints its roofline next to each figure: prefill as % of the int8 peak in matmuls,
# decode as % of the bandwidth limit counting weights + the F32 KV actually read per token.
# Usage: bench/longctx.sh MODEL.gguf [OUT]   (env: PREFILL="128 4096", DEPTH="0 4096", GEN=16,
#        REPS=1, THREADS=2, LLAMA_BENCH=path or "" to skip llama.cpp, CINFER_BIN)
set -euo pipefail
usage="usage: bench/longctx.sh MODEL.gguf [OUT.txt]
env: PREFILL (default '128 4096'), DEPTH (default '0 4096'), GEN (16), REPS (1), THREADS (2),
     LLAMA_BENCH (default /work/llama/build/bin/llama-bench; empty: cinfer only), CINFER_BIN"
case ${1:-} in -h|--help) printf '%s\n' "$usage"; exit 0 ;; ""|-*) printf '%s\n' "$usage" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1
out=${2:-/dev/null}
bin=${CINFER_BIN:-$root/build/cinfer}
llama=${LLAMA_BENCH-/work/llama/build/bin/llama-bench}
t=${THREADS:-2} reps=${REPS:-1} gen=${GEN:-16}
[ -f "$model" ] || { echo "longctx.sh: no model '$model'" >&2; exit 2; }
run() { echo "\$ $*"; "$@" 2>&1 | grep -vE '^(llama_|load|print_info|ggml_|build:)' || true; echo; }
{
  echo "# bench/longctx.sh $model ($(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg))"
  for p in ${PREFILL-128 4096}; do
    run "$bin" bench latency -m "$model" -t "$t" -r "$reps" -p "$p" -n 1
    [ -z "$llama" ] || run "$llama" -m "$model" -t "$t" -r "$reps" -fa 1 -p "$p" -n 0
  done
  for d in ${DEPTH-0 4096}; do
    run "$bin" bench latency -m "$model" -t "$t" -r "$reps" -d "$d" -p 0 -n "$gen"
    [ -z "$llama" ] || run "$llama" -m "$model" -t "$t" -r "$reps" -fa 1 -p 0 -n "$gen" -d "$d"
  done
} | tee "$out"
