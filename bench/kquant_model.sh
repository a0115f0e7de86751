#!/usr/bin/env bash
# bench/kquant_model.sh - issue 22's performance criteria in one run: a TinyLlama-1.1B-shaped model
# in Q4_K_M, Q5_K_M, Q6_K and IQ4_XS (made with `cinfer quantize` from a Q8_0 source, llama.cpp's
# per-tensor mixes) and an FP8 (e4m3, 128x128 block scales) qwen3 directory of the same shape,
# decode and 512-token prefill with `cinfer bench latency` (which reports % of the bandwidth
# roofline), and llama.cpp's llama-bench on the SAME GGUF file right after each cinfer row
# (llama.cpp has no FP8 weight type: that row is cinfer only, Q8_0 beside it as a practical roofline).
set -euo pipefail
usage="usage: bench/kquant_model.sh [OUT.txt]
Runs, per type (TYPES, default 'q4_k q5_k q6_k iq4_xs'), on \$MODELS/tl-TYPE.gguf:
  cinfer bench latency -m M -p PROMPT -n GEN -t THREADS -r REPS
  llama-bench -m M -p PROMPT -n GEN -t THREADS -r REPS --repack R   (each R in LLAMA_REPACK)
then the FP8 directory \$MODELS/fp8-tinyllama-shape (bench/fp8_model.py) and the Q8_0 source
(cinfer only). Missing models are made first. Output goes to stdout and OUT.txt.
Environment: SRC (Q8_0 source, default /work/bench-models/tl-q8_0.gguf), MODELS (default
build/bench-models), PYTHON (with numpy; default /work/venvs/hf/bin/python), PROMPT (512), GEN (64), THREADS (2), REPS (2), FP8 (1: include FP8),
FP8_PROMPT (16: the FP8 criterion is decode; its prefill is the slow per-row bf16 path), Q8 (1: the Q8_0 rows),
LLAMA_BENCH (default /work/llama/build/bin/llama-bench; empty: cinfer only), LLAMA_REPACK (default 0:
llama.cpp's plain kernels; '0 1' adds its default, weights repacked at load), CINFER_BIN.
  -h, --help   this text"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "kquant_model.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/dev/null}
bin=${CINFER_BIN:-$root/build/cinfer}
llama=${LLAMA_BENCH-/work/llama/build/bin/llama-bench}
models=${MODELS:-$root/build/bench-models}
src=${SRC:-/work/bench-models/tl-q8_0.gguf}
py=${PYTHON:-/work/venvs/hf/bin/python} # numpy (bench/fp8_model.py)
p=${PROMPT:-512} g=${GEN:-64} t=${THREADS:-2} r=${REPS:-2}
[ -f "$src" ] || { echo "kquant_model.sh: no source model '$src' (set SRC)" >&2; exit 2; }
mkdir -p "$models"
for ty in ${TYPES-q4_k q5_k q6_k iq4_xs}; do
  [ -f "$models/tl-$ty.gguf" ] || "$bin" quantize "$src" "$models/tl-$ty.gguf" "$ty" >&2
done
fp8dir="$models/fp8-tinyllama-shape"
if [ "${FP8:-1}" = 1 ] && [ ! -f "$fp8dir/config.json" ]; then "$py" "$root/bench/fp8_model.py" "$fp8dir" >&2; fi
cpu() { /usr/bin/time -f "  cpu: user %U s sys %S s wall %e s" "$@"; }
run() {
  echo "\$ $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
  cpu "$@" 2>&1 | grep -E '^(model|machine|prefill|decode|cpu |note |  cpu:|\|)' || true
}
{
  echo "# bench/kquant_model.sh ($(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), commit $(git -C "$root" rev-parse --short HEAD))"
  for ty in ${TYPES-q4_k q5_k q6_k iq4_xs}; do
    m="$models/tl-$ty.gguf"
    echo "## $ty"
    run "$bin" bench latency -m "$m" -p "$p" -n "$g" -t "$t" -r "$r"
    for rp in ${LLAMA_REPACK:-0}; do
      [ -z "$llama" ] || run "$llama" -m "$m" -p "$p" -n "$g" -t "$t" -r "$r" --repack "$rp"
    done
  done
  if [ "${FP8:-1}" = 1 ]; then
    echo "## fp8 (e4m3, 128x128 block scales; no llama.cpp row: it has no FP8 weight type)"
    run "$bin" bench latency -m "$fp8dir" -p "${FP8_PROMPT:-16}" -n "$g" -t "$t" -r "$r"
  fi
  if [ "${Q8:-1}" = 1 ]; then
    echo "## q8_0 source (reference row)"
    run "$bin" bench latency -m "$src" -p "$p" -n "$g" -t "$t" -r "$r"
    [ -z "$llama" ] || run "$llama" -m "$src" -p "$p" -n "$g" -t "$t" -r "$r" --repack 0
  fi
} | tee "$out"
