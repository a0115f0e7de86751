#!/usr/bin/env bash
# bench/kv_dtype.sh - decode at depth with each KV cache type, cinfer next to llama.cpp
# (llama-bench -fa 1 -ctk T -ctv T, the same types) in one run, depth by depth and type by type
# (the machine is shared and noisy: compare within a run, not across runs):
#   cinfer bench latency -d D -p 0 -n GEN --kv-dtype T  |  llama-bench -fa 1 -ctk T -ctv T -p 0 -n GEN -d D
# cinfer prints its bandwidth limit next to each figure (weights + the KV bytes of type T read per
# token at the mean depth). THREADS defaults to 1: at this VM's load llama.cpp's spinning thread pool
# collapses at 2 threads (0.77 tok/s at depth 1024 while cinfer did 292), which measures the load,
# not the kernels.
set -euo pipefail
usage="usage: bench/kv_dtype.sh MODEL.gguf [OUT.txt]
env: DEPTHS (default '4096 16384'), TYPES (default 'f32 bf16 f16 q8_0'), GEN (16), REPS (1), THREADS (1),
     LLAMA_BENCH (default /work/llama/build/bin/llama-bench; empty: cinfer only), CINFER_BIN"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  "") echo "kv_dtype.sh: a model is required (--help for usage)" >&2; exit 2 ;;
  -*) echo "kv_dtype.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1
out=${2:-/dev/null}
bin=${CINFER_BIN:-$root/build/cinfer}
llama=${LLAMA_BENCH-/work/llama/build/bin/llama-bench}
t=${THREADS:-1} reps=${REPS:-1} gen=${GEN:-16}
[ -f "$model" ] || { echo "kv_dtype.sh: no model '$model'" >&2; exit 2; }
run() { echo "\$ $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"; "$@" 2>&1 | grep -E '^(model|machine|decode|\|)' || true; echo; }
# --repack 0: this VM reports AMX but faults on its tile instructions (see bench/longctx.sh).
{
  echo "# bench/kv_dtype.sh $model ($(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
  for d in ${DEPTHS-4096 16384}; do
    for ty in ${TYPES-f32 bf16 f16 q8_0}; do
      run "$bin" bench latency -m "$model" -t "$t" -r "$reps" -d "$d" -p 0 -n "$gen" --kv-dtype "$ty"
      # llama-bench's -ctk/-ctv take no f32 (ggml_type_from_name knows f16, bf16 and the quants only)
      if [ -n "$llama" ] && [ "$ty" != f32 ]; then
        run "$llama" -m "$model" -t "$t" -r "$reps" -fa 1 --repack 0 -ctk "$ty" -ctv "$ty" -p 0 -n "$gen" -d "$d"
      fi
    done
  done
} | tee "$out"
