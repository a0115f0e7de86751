#!/bin/bash
# store_ttft.sh - issue 8 benchmark: TTFT of a cached long prefix (loaded from the persistent
# KV store by a restarted server) vs recompute, through `cinfer serve` (bench/store_ttft.py).
# usage: bench/store_ttft.sh [MODEL.gguf] [N_TOKENS] [CTX] [THREADS]   (--help)
# Defaults: the TinyLlama-1.1B-shape Q8_0 model of bench/latency.sh, 8000 tokens, ctx 8192, 2 threads.
# Writes bench/results/store_ttft.txt. The store directory is a fresh temp dir, removed at the end.
set -eu
usage="usage: bench/store_ttft.sh [MODEL.gguf] [N_TOKENS] [CTX] [THREADS]
TTFT of a long prefix loaded from the persistent KV store by a restarted 'cinfer serve' versus
recompute (bench/store_ttft.py). Defaults: the TinyLlama-1.1B-shape Q8_0 model of
bench/latency.sh, 8000 tokens, ctx 8192, 2 threads. The store is a fresh mktemp directory,
removed at the end. Writes bench/results/store_ttft.txt.
  -h, --help   this text"
for a in "$@"; do
  case $a in
    -h|--help) printf '%s\n' "$usage"; exit 0 ;;
    -*) echo "store_ttft.sh: unknown option '$a' (see store_ttft.sh --help)" >&2; exit 2 ;;
  esac
done
if [ $# -gt 4 ]; then echo "store_ttft.sh: at most 4 arguments (see store_ttft.sh --help)" >&2; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$here/..
bin=${CINFER_BIN:-$root/build/cinfer}
model=${1:-$root/build/bench-models/tinyllama-1.1b-shape-q8_0.gguf}
n=${2:-8000}; ctx=${3:-8192}; threads=${4:-2}
py=${CINFER_VENV:-$root/.venv}/bin/python
[ -x "$py" ] || py=python3
store=$(mktemp -d /tmp/cinfer-bench-store-ttft.XXXXXX)
trap 'rm -rf "$store"' EXIT
out=$here/results/store_ttft.txt
{
    echo "# bench/store_ttft.sh $model $n $ctx $threads   ($(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
    "$py" "$here/store_ttft.py" "$bin" "$model" "$n" "$ctx" "$threads" "$store"
} | tee "$out"
