#!/usr/bin/env bash
# bench/deepseek.sh - reproduces bench/results/deepseek-v2-lite-*.txt: builds a DeepSeek-V2-Lite-shaped
# random model (dim 2048, 16 heads, MLA kv_lora 512 / q_lora 0 / qk_nope 128 / qk_rope 64 / v 128,
# 64 routed experts top-6 + 2 shared of width 1408, first layer dense with ffn 10944, softmax gating,
# the deepseek-llm vocab of 102400 tokens) with `cinfer mkmodel`, then measures decode at 1 stream
# (`bench latency`, which also prints the read bandwidth and the roofline from the *active* bytes per
# token) and at 1 and 16 streams through the engine (`bench throughput`, decode-phase rate).
# Usage: bench/deepseek.sh DTYPE [LAYERS]   (LAYERS default 27 = the real model; fewer to fit RAM; --help).
# Models go to $BENCH_MODELS (default build/bench-models): ~8.8 GB for q4_0 at 27 layers.
set -euo pipefail
usage="usage: bench/deepseek.sh DTYPE [LAYERS]
Builds a DeepSeek-V2-Lite-shaped random model (LAYERS default 27, the real model) in DTYPE with
'cinfer mkmodel' into \$BENCH_MODELS (default build/bench-models) and measures decode with
'cinfer bench latency' and 'cinfer bench throughput' at 1 and 16 streams; results go to
bench/results/deepseek-v2-lite-*.txt.
  -h, --help   this text"
for a in "$@"; do
  case $a in
    -h|--help) printf '%s\n' "$usage"; exit 0 ;;
    -*) echo "deepseek.sh: unknown option '$a' (see deepseek.sh --help)" >&2; exit 2 ;;
  esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then echo "deepseek.sh: expected DTYPE [LAYERS] (see deepseek.sh --help)" >&2; exit 2; fi
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CINFER_BIN:-$root/build/cinfer}
shared=${CINFER_SHARED:-$root/../shared}
models=${BENCH_MODELS:-$root/build/bench-models}
dt=${1:?usage: bench/deepseek.sh DTYPE [LAYERS]}
layers=${2:-27}
mkdir -p "$models" "$root/bench/results"
m="$models/deepseek-v2-lite-shape-L$layers-$dt.gguf"
if [ ! -f "$m" ]; then
  "$bin" mkmodel --arch deepseek2 --dim 2048 --layers "$layers" --heads 16 --ffn 10944 --kv-lora 512 \
    --qk-nope 128 --qk-rope 64 --v-head 128 --experts 64 --experts-used 6 --expert-ffn 1408 \
    --shared-experts 2 --dense-layers 1 --gating softmax --ctx 4096 \
    --vocab-from "$shared/fixtures/vocab/ggml-vocab-deepseek-llm.gguf" --dtype "$dt" --seed 1 "$m"
fi
out="$root/bench/results/deepseek-v2-lite-L$layers-$dt.txt"
{ echo "# bench/deepseek.sh $dt $layers   ($(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), machine shared with other jobs)"
  echo "## cinfer bench latency -p 64 -n 32 -r 1 -t 2"
  "$bin" bench latency -m "$m" -p 64 -n 32 -r 1 -t 2
  for n in 1 16; do
    echo "## cinfer bench throughput --requests $n --input-len 32 --output-len 32 --max-seqs $n -t 2"
    "$bin" bench throughput -m "$m" --requests "$n" --input-len 32 --output-len 32 --max-seqs "$n" -t 2 --kv-memory 1
  done; } | tee "$out"
