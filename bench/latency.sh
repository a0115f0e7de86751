#!/usr/bin/env bash
# bench/latency.sh - reproduces bench/results/latency-*.txt: builds a TinyLlama-1.1B-shaped random
# model (dim 2048, 22 layers, 32 heads, 4 KV heads, ffn 5632, llama-spm vocab) with `cinfer mkmodel`
# in each dtype, then runs `cinfer bench latency -p 512 -n 128 -t 2` on it.
# Usage: bench/latency.sh [dtype...]   (default: q8_0 q4_0 bf16; --help). Models go to $BENCH_MODELS
# (default build/bench-models, ~1.2 GB each for q8_0, 2.2 GB for bf16).
set -euo pipefail
usage="usage: bench/latency.sh [DTYPE...]
Builds a TinyLlama-1.1B-shaped random model per DTYPE (default: q8_0 q4_0 bf16) with
'cinfer mkmodel' into \$BENCH_MODELS (default build/bench-models) and runs
'cinfer bench latency -p 512 -n 128 -t 2' on each; results go to bench/results/latency-*.txt.
  -h, --help   this text"
for a in "$@"; do
  case $a in
    -h|--help) printf '%s\n' "$usage"; exit 0 ;;
    -*) echo "latency.sh: unknown option '$a' (see latency.sh --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CINFER_BIN:-$root/build/cinfer}
shared=${CINFER_SHARED:-$root/../shared}
models=${BENCH_MODELS:-$root/build/bench-models}
mkdir -p "$models" "$root/bench/results"
dtypes=("$@"); [ ${#dtypes[@]} -gt 0 ] || dtypes=(q8_0 q4_0 bf16)
for dt in "${dtypes[@]}"; do
  m="$models/tinyllama-1.1b-shape-$dt.gguf"
  if [ ! -f "$m" ]; then
    "$bin" mkmodel --arch llama --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 \
      --vocab-from "$shared/fixtures/vocab/ggml-vocab-llama-spm.gguf" --dtype "$dt" --seed 1 "$m"
  fi
  out="$root/bench/results/latency-tinyllama-$dt.txt"
  cmd="cinfer bench latency -m tinyllama-1.1b-shape-$dt.gguf -p 512 -n 128 -t 2"
  { echo "# $cmd   ($(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
    "$bin" bench latency -m "$m" -p 512 -n 128 -t 2; } | tee "$out"
done
