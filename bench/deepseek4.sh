#!/usr/bin/env bash
# bench/deepseek4.sh - DeepSeek V4 (deepseek4) benchmarks of issue 15, cinfer next to llama.cpp's
# deepseek4 on the same GGUF in one run (the machine is shared and noisy: compare within a run).
#   1. decode and short prefill on a V4-Flash-shaped model scaled to fit (8 layers: 2 window-only,
#      then CSA / HCA alternating; latent 512, rope 64, 16 heads, q LoRA 512, 4 output groups of
#      rank 512, indexer 64 x 128 top-k 512, window 128, 32 experts (6 used) of 512 + 1 shared,
#      3 hash layers, mHC 4 streams), Q8_0 and Q4_0:
#        cinfer bench latency -p P -n G         (prints the active-bytes roofline)
#        llama-bench -p P -n G --repack 0
#   2. 1 and 16 streams through the engine (cinfer bench throughput); llama.cpp has no batched
#      benchmark binary in /work/llama/build/bin, so this one has no peer figure.
#   3. long-context prefill, time per token, deepseek4 against a V3-shaped MLA model (deepseek2:
#      kv-lora 512 + rope 64, 128 + 64 query/key, 128 value) of similar active size, both cinfer
#      (2 layers each, so that 2 cores finish in minutes), with the KV bytes per token of both;
#      prompts in chunks of at most BATCH tokens (chunked prefill, as the server runs them).
#      BASE_BIN (a cinfer binary of another commit) adds its deepseek4 runs at the lengths in
#      BASE_LONG right after ours, for a same-run before/after ratio.
set -euo pipefail
usage="usage: bench/deepseek4.sh [OUT.txt]
env: DTYPES (default 'q8_0 q4_0'), PROMPT (64), GEN (16), LONG (default '8192 32768'),
     BATCH (4096), LONG_MODELS (default 'ds4 mla'), SECTIONS (default '1 2 3'),
     BASE_BIN (baseline cinfer for section 3's deepseek4, default none), BASE_LONG (default '8192'),
     THREADS (2), LLAMA_BENCH (default /work/llama/build/bin/llama-bench; empty: cinfer only),
     CINFER_BIN, MODELS (directory for the generated models, default build/bench-models),
     VOCAB (default \$CINFER_SHARED/models/stories260K.gguf)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "deepseek4.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/dev/null}
bin=${CINFER_BIN:-$root/build/cinfer}
llama=${LLAMA_BENCH-/work/llama/build/bin/llama-bench}
models=${MODELS:-$root/build/bench-models}
vocab=${VOCAB:-${CINFER_SHARED:-$root/../shared}/models/stories260K.gguf}
t=${THREADS:-2} p=${PROMPT:-64} g=${GEN:-16} batch=${BATCH:-4096} sections=${SECTIONS-1 2 3}
[ -f "$vocab" ] || { echo "deepseek4.sh: no vocabulary '$vocab'" >&2; exit 2; }
mkdir -p "$models"
run() { echo "\$ $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"; "$@" 2>&1 | grep -E '^(model|machine|prefill|decode|cpu|workload|wall|input|output|engine|cinfer: KV|\|)' || true; echo; }
flash() { # DTYPE -> path of the V4-Flash-shaped model
  local f="$models/ds4-flash-L8-$1.gguf"
  [ -f "$f" ] || "$bin" mkmodel --arch deepseek4 --dim 1024 --layers 8 --heads 16 --ffn 512 --head-dim 512 \
    --qk-rope 64 --q-lora 512 --o-groups 4 --o-lora 512 --ratios 0,0,4,128,4,128,4,128 --window 128 \
    --index-heads 64 --index-dim 128 --index-topk 512 --experts 32 --experts-used 6 --expert-ffn 512 \
    --shared-experts 1 --hash-layers 3 --swiglu-limit 10 --expert-scale 1.5 --ctx 65536 \
    --vocab-from "$vocab" --dtype "$1" --seed 7 "$f" >/dev/null 2>&1
  echo "$f"
}
. "$root/bench/lib/long_models.sh"
kv_line() { "$bin" run -m "$1" -p "Once upon a time" -n 1 --temp 0 -c 256 2>&1 | grep -E '^cinfer: KV' || true; }
{
  echo "# bench/deepseek4.sh ($(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
  if [[ " $sections " == *" 1 "* ]]; then
  echo "## 1. decode and prefill, V4-Flash-shaped (8 layers), cinfer vs llama.cpp on the same file"
  for d in ${DTYPES-q8_0 q4_0}; do
    m=$(flash "$d")
    kv_line "$m"
    run "$bin" bench latency -m "$m" -t "$t" -r 1 -p "$p" -n "$g"
    [ -z "$llama" ] || run "$llama" -m "$m" -t "$t" -r 1 --repack 0 -p "$p" -n "$g"
  done
  fi
  if [[ " $sections " == *" 2 "* ]]; then
  echo "## 2. engine, 1 and 16 streams (Q8_0)"
  m=$(flash q8_0)
  for n in 1 16; do
    run "$bin" bench throughput -m "$m" -t "$t" --requests "$n" --max-seqs "$n" --input-len "$p" --output-len "$g"
  done
  fi
  if [[ " $sections " == *" 3 "* ]]; then
  echo "## 3. long-context prefill: deepseek4 (CSA + HCA) vs V3-shaped MLA (2 layers each, Q8_0)"
  for which in ${LONG_MODELS-ds4 mla}; do
    case $which in ds4) m=$(long_ds4) ;; mla) m=$(long_mla) ;; *) echo "deepseek4.sh: LONG_MODELS: '$which'?" >&2; exit 2 ;; esac
    kv_line "$m"
    for n in ${LONG-8192 32768}; do
      b=$((n < batch ? n : batch))
      run "$bin" bench latency -m "$m" -t "$t" -r 1 -b "$b" -p "$n" -n 4 --bw-mib 256
      if [ "$which" = ds4 ] && [ -n "${BASE_BIN:-}" ] && [[ " ${BASE_LONG-8192} " == *" $n "* ]]; then
        run "$BASE_BIN" bench latency -m "$m" -t "$t" -r 1 -b "$b" -p "$n" -n 4 --bw-mib 256
      fi
    done
  done
  fi
} | tee "$out"
