#!/usr/bin/env bash
# bench/longctx.sh - long-context prefill and decode, cinfer next to llama.cpp (llama-bench -fa 1)
# in one run, case by case (the machine is shared and noisy: compare within a run, not across
# runs). For each P in CASES:
#   cinfer bench latency -p P -n GEN        prefill P tokens, then decode GEN at depth P
#                                           (once per attention precision in PRECISIONS)
#   llama-bench -fa 1 -p P -n 0             prefill P tokens  (all with --repack 0, see lb)
#   llama-bench -fa 1 -p 0 -n GEN -d P      decode GEN at depth P (one repetition; its decode also in
#                                           process CPU time: bench/lib/cpu_tail.py)
# and for each D in DEPTHS (decode only, the depth filled untimed):
#   cinfer bench latency -d D -p 0 -n GEN  |  llama-bench -fa 1 -p 0 -n GEN -d D
# cinfer prints its limits next to each figure: prefill as % of the int8 peak in matmuls, decode
# as % of the bandwidth limit counting weights + the F32 KV actually read per token, and a "cpu"
# line: the same work per process CPU-second (tok/s with every thread on its own core), decode
# there against the same bandwidth probe timed in process CPU seconds (on a loaded machine the
# figures to compare; llama-bench has wall-clock times only).
set -euo pipefail
usage="usage: bench/longctx.sh MODEL.gguf [OUT.txt]
env: CASES (default '128 4096'), DEPTHS (default ''), GEN (16), REPS (1), LLAMA_REPS (REPS), THREADS (2), BATCH (512),
     LLAMA_DECODE (1; 0 skips llama-bench's decode at depth P in CASES: a prefill-only comparison),
     PRECISIONS (cinfer --attn-precision values, 'default' = no flag (what a user gets); default 'f32 bf16'), KV_DTYPES
     (cinfer --kv-dtype values for the DEPTHS rows, default: the server default), DEPTH_PRECISION (cinfer
     --depth-attn-precision of the untimed fill in the DEPTHS rows, default: as timed), CINFER_BINS (several cinfer
     builds, alternated row by row; default CINFER_BIN), LLAMA_BENCH (default /work/llama/build/bin/llama-bench; empty:
     cinfer only), CINFER_BIN"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  "") echo "longctx.sh: a model is required (--help for usage)" >&2; exit 2 ;;
  -*) echo "longctx.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1
out=${2:-/dev/null}
bin=${CINFER_BIN:-$root/build/cinfer}
bins=${CINFER_BINS:-$bin}
llama=${LLAMA_BENCH-/work/llama/build/bin/llama-bench}
# BATCH: cinfer's tokens per forward call (-b) and llama-bench's -b. 512 = llama-bench's default
# ubatch (its physical batch): cinfer prefills in forward calls of that size too, which is also
# faster than 4096-token calls here (bench/README.md, session 7).
t=${THREADS:-2} reps=${REPS:-1} lreps=${LLAMA_REPS:-${REPS:-1}} gen=${GEN:-16} batch=${BATCH:-512} precs=${PRECISIONS:-f32 bf16}
[ -f "$model" ] || { echo "longctx.sh: no model '$model'" >&2; exit 2; }
run() { echo "\$ $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"; "$@" 2>&1 | grep -E '^(model|machine|prefill|decode|cpu|\|)' || true; echo; }
# --repack 0: this VM reports AMX but faults on its tile instructions (ldtilecfg, SIGSEGV in
# ggml_backend_amx_mul_mat), and repacking is what selects ggml's AMX buffers for Q8_0.
prec() { [ "$1" = default ] || echo "--attn-precision $1"; }
lb() { [ -z "$llama" ] || run "$llama" -m "$model" -t "$t" -r "$lreps" -fa 1 --repack 0 -b "$batch" "$@"; }
# llama-bench decode rows: one repetition, with its decode also in process CPU time (bench/lib/cpu_tail.py)
lbd() { [ -z "$llama" ] || run python3 "$root/bench/lib/cpu_tail.py" "$t" -- "$llama" -m "$model" -t "$t" -r 1 -fa 1 --repack 0 -b "$batch" "$@"; }
{
  echo "# bench/longctx.sh $model ($(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
  for p in ${CASES-128 4096}; do
    for a in $precs; do run "$bin" bench latency -m "$model" -t "$t" -r "$reps" -b "$batch" -p "$p" -n "$gen" $(prec "$a"); done
    lb -p "$p" -n 0
    [ "${LLAMA_DECODE:-1}" = 0 ] || lbd -p 0 -n "$gen" -d "$p"
  done
  for d in ${DEPTHS-}; do
    for a in $precs; do
      for kv in ${KV_DTYPES:-default}; do
        for b in $bins; do
          extra=()
          [ "$kv" = default ] || extra+=(--kv-dtype "$kv")
          [ -z "${DEPTH_PRECISION:-}" ] || extra+=(--depth-attn-precision "$DEPTH_PRECISION")
          run "$b" bench latency -m "$model" -t "$t" -r "$reps" -b "$batch" -d "$d" -p 0 -n "$gen" $(prec "$a") "${extra[@]}"
        done
      done
    done
    lbd -p 0 -n "$gen" -d "$d"
  done
} | tee "$out"
