#!/bin/bash
# structured_cost.sh - issue 17 benchmark: throughput of structured outputs (json_schema, json_object,
# regex) against unconstrained decoding at 16 streams, cinfer serve and llama.cpp's llama-server (the
# peer, when built) on the same GGUF in one run (bench/structured_cost.py).
# usage: bench/structured_cost.sh [MODEL.gguf] [THREADS] [REQUESTS] [MAX_TOKENS]   (--help)
# Defaults: tiny-llama (random weights, 32k vocabulary: the forward pass is cheap, so the mask's share
# is the largest it gets), 2 threads, 16 requests per mode and round (3 rounds; the peer 1), 48 tokens each.
# Writes bench/results/structured-cost.txt.
set -eu
usage="usage: bench/structured_cost.sh [MODEL.gguf] [THREADS] [REQUESTS] [MAX_TOKENS]
Throughput of structured outputs vs unconstrained decoding at 16 streams, cinfer and llama-server
(LLAMA_SERVER, default /work/llama/build/bin/llama-server; skipped when missing) on the same model.
Defaults: \$CINFER_SHARED/models/tiny/tiny-llama.gguf, 2 threads, 16 requests per mode and round (3 rounds; the peer 1), 48 tokens.
Writes bench/results/structured-cost.txt.
  -h, --help   this text"
for a in "$@"; do
  case $a in
    -h|--help) printf '%s\n' "$usage"; exit 0 ;;
    -*) echo "structured_cost.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
root=$here/..
shared=${CINFER_SHARED:-$root/../shared}
bin=${CINFER_BIN:-$root/build/cinfer}
llama=${LLAMA_SERVER:-/work/llama/build/bin/llama-server}
model=${1:-$shared/models/tiny/tiny-llama.gguf}
threads=${2:-2}; requests=${3:-16}; max_tokens=${4:-48}
py=${CINFER_VENV:-$root/.venv}/bin/python
[ -x "$py" ] || py=python3
out=$here/results/structured-cost.txt
{
    echo "# bench/structured_cost.sh $model $threads $requests $max_tokens   ($(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
    "$py" "$here/structured_cost.py" "$bin" "$llama" "$model" "$threads" "$requests" "$max_tokens"
} | tee "$out"
