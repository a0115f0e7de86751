#!/usr/bin/env bash
# bench/before_after.sh - one run that alternates two builds (OLD_DIR, NEW_DIR: build folders with
# `cinfer` and `bench_recipe`) on the same model, so their ratio is measured under the same load:
# bench_recipe, `bench latency -p 512 -n 128`, `bench throughput` with 16 streams; two rounds.
# Usage: bench/before_after.sh OLD_DIR NEW_DIR MODEL.gguf   (e.g. the TinyLlama-shape Q8_0 of latency.sh)
# NEW_ARGS (environment): extra flags for the new side's `cinfer bench` commands, e.g.
# NEW_ARGS="--weights-cache DIR" to measure the new build running from the weights cache.
set -euo pipefail
usage="usage: [NEW_ARGS=...] bench/before_after.sh OLD_DIR NEW_DIR MODEL.gguf"
case "${1:-}" in
  -h|--help) echo "$usage"; sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "bench/before_after.sh: unknown option '$1' ($usage)" >&2; exit 2 ;;
esac
[ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
old=$1 new=$2 model=$3
for round in 1 2; do
  for side in old new; do
    dir=$old extra=()
    if [ "$side" = new ]; then dir=$new; read -r -a extra <<<"${NEW_ARGS:-}"; fi
    echo "=== round $round $side ($dir${extra[*]:+ ${extra[*]}})"
    "$dir/bench_recipe" 0.5 2>&1 | grep -E "all four"
    "$dir/cinfer" bench latency -m "$model" -p 512 -n 128 -t 2 "${extra[@]}" 2>&1 | grep -E "^(prefill|decode) "
    "$dir/cinfer" bench throughput -m "$model" --requests 16 --input-len 256 --output-len 64 -t 2 --max-seqs 16 \
      "${extra[@]}" 2>&1 |
      grep -E "^(output|decode phase) "
  done
done
