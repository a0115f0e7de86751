#!/usr/bin/env bash
# bench/mtp_cost.sh - what one MTP draft step costs against one target decode step (issue 18):
# bench_mtp_cost on three random-weight mkmodel models with an MTP block, Q8_0, 2 threads, after a
# 256-token context (best of 30, alternating, wall and CPU time):
#   ds2-small  deepseek2, 3 + 1 next-n layers, dim 256 (the LM head dominates)
#   ds2-8l     deepseek2, 8 + 1 next-n layers, dim 512, 32 experts (4 used) + 1 shared
#   ds4-6l     deepseek4, 6 layers (CSA / HCA alternating) + 1 window-only MTP block, dim 256
#   ds4-6l-dspark-rR  the same deepseek4 shape with a DSpark block drafter (--dspark-block 8, Markov rank R:
#              DSPARK_RANKS, default 256 = the real rank, and 32 = dim / 8, near the real n_embd : rank of
#              16; its stage is the MTP block): with -k K (DSPARK_K, default 4 and 8) a chain of K MTP
#              steps against one K-row DSpark block (stage pass + Markov/confidence heads), alternating
# A chain of k drafts costs k MTP steps plus one catch-up pass of the accepted rows per verify.
# No peer figure: llama.cpp's MTP runs only through llama-server's draft-mtp, not a step benchmark.
set -euo pipefail
usage="usage: bench/mtp_cost.sh [OUT.txt]
env: THREADS (2), PROMPT (256), REPS (30), DSPARK_K (\"4 8\"), DSPARK_RANKS (\"256 32\"),
     CINFER_BUILD (default build), MODELS (default build/bench-models), VOCAB (default \$CINFER_SHARED/fixtures/vocab/derived-vocab-tiny-deepseek2.gguf)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "mtp_cost.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/dev/null}
build=${CINFER_BUILD:-$root/build}
models=${MODELS:-$root/build/bench-models}
vocab=${VOCAB:-${CINFER_SHARED:-$root/../shared}/fixtures/vocab/derived-vocab-tiny-deepseek2.gguf}
threads=${THREADS:-2} prompt=${PROMPT:-256} reps=${REPS:-30} dspark_k=${DSPARK_K:-4 8} dspark_ranks=${DSPARK_RANKS:-256 32}
for f in "$build/cinfer" "$build/bench_mtp_cost" "$vocab"; do
  [ -e "$f" ] || { echo "mtp_cost.sh: missing $f" >&2; exit 1; }
done
mkdir -p "$models"
ds2="--arch deepseek2 --kv-lora 64 --qk-nope 32 --qk-rope 16 --v-head 32 --dense-layers 1 --shared-experts 1"
mk() { local name=$1; shift; [ -e "$models/$name.gguf" ] ||
  "$build/cinfer" mkmodel "$@" --mtp-layers 1 --vocab-from "$vocab" --dtype q8_0 --seed 5 "$models/$name.gguf" >/dev/null; }
mk mtp-ds2-small $ds2 --dim 256 --layers 4 --heads 4 --ffn 512 --experts 16 --experts-used 4 --expert-ffn 128
mk mtp-ds2-8l $ds2 --dim 512 --layers 8 --heads 8 --ffn 1024 --q-lora 256 --experts 32 --experts-used 4 \
  --expert-ffn 256
mk mtp-ds4-6l --arch deepseek4 --dim 256 --layers 6 --heads 4 --ffn 256 --head-dim 128 --qk-rope 32 --q-lora 128 \
  --o-groups 2 --o-lora 64 --ratios 4,128,4,128,4,128,0 --window 128 --index-heads 8 --index-dim 64 \
  --index-topk 16 --experts 16 --experts-used 4 --expert-ffn 128 --shared-experts 1
for r in $dspark_ranks; do
  mk mtp-ds4-6l-dspark-r$r --arch deepseek4 --dim 256 --layers 6 --heads 4 --ffn 256 --head-dim 128 --qk-rope 32 \
    --q-lora 128 --o-groups 2 --o-lora 64 --ratios 4,128,4,128,4,128,0 --window 128 --index-heads 8 \
    --index-dim 64 --index-topk 16 --experts 16 --experts-used 4 --expert-ffn 128 --shared-experts 1 \
    --dspark-block 8 --dspark-taps 4,5,6 --dspark-rank "$r"
done
{
  echo "# bench/mtp_cost.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
  for name in mtp-ds2-small mtp-ds2-8l mtp-ds4-6l; do
    "$build/bench_mtp_cost" -m "$models/$name.gguf" -t "$threads" -p "$prompt" -r "$reps"
  done
  for r in $dspark_ranks; do
    for k in $dspark_k; do
      "$build/bench_mtp_cost" -m "$models/mtp-ds4-6l-dspark-r$r.gguf" -t "$threads" -p "$prompt" -r "$reps" -k "$k"
    done
  done
} | tee "$out"
