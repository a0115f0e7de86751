#!/usr/bin/env bash
# bench/spec.sh - speculative decoding benchmark (bench/results/spec-*.txt): single-stream
# generation on the `code` workload of `cinfer bench serve` (concurrency 1, greedy, ignore EOS),
# cinfer without speculation, cinfer with the n-gram drafter, and - when
# /work/llama/build/bin/llama-server (or $LLAMA_SERVER) exists - llama.cpp's llama-server without
# and with its n-gram speculation, on the same model and prompts, one after another in one run.
# Then the crossover: cinfer at concurrency 2, 4, 8 ($CROSS) with and without n-gram drafts.
# Usage: bench/spec.sh MODEL.gguf [--requests N] [--output-len N] [--threads N] [-h|--help]
set -euo pipefail
usage="usage: bench/spec.sh MODEL.gguf [--requests N] [--output-len N] [--threads N]
Single-stream tok/s on the code workload: cinfer plain vs cinfer --speculative ngram vs
llama-server (plain and --spec-type ngram-* when available), then the concurrency crossover.
  -h, --help   this text"
model="" ; nreq=4 ; olen=96 ; threads=2
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) printf '%s\n' "$usage"; exit 0 ;;
    --requests) nreq=$2; shift 2 ;;
    --output-len) olen=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -*) echo "spec.sh: unknown option '$1' (see spec.sh --help)" >&2; exit 2 ;;
    *) model=$1; shift ;;
  esac
done
[ -n "$model" ] || { printf '%s\n' "$usage" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CINFER_BIN:-$root/build/cinfer}
llama=${LLAMA_SERVER:-/work/llama/build/bin/llama-server}
port=18977
pid=""
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; }
trap cleanup EXIT

wait_up() { for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0; sleep 0.2; done; return 1; }

# run NAME CONCURRENCY: bench serve against the server on $port; prints one summary line.
run() {
  local name=$1 conc=$2 out
  out=$("$bin" bench serve --base-url "http://127.0.0.1:$port" --workload code --concurrency "$conc" \
        --requests $((nreq * conc)) --input-len 256 --output-len "$olen" --ignore-eos --temperature 0 \
        --api completions --text --no-progress 2>&1)
  local tps tpot
  tps=$(printf '%s\n' "$out" | awk '/output tokens\/s|Output token throughput|output tok\/s/ {print $NF; exit}')
  tpot=$(printf '%s\n' "$out" | awk '/time per output token/ {print "tpot_ms_mean=" $5; exit}')
  local acc=""
  acc=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^cinfer_spec_(draft|accepted)_tokens_total|^cinfer_spec_verifies_total/ {printf "%s=%s ", $1, $2}')
  echo "$name conc=$conc output_tok_s=$tps | $tpot | $acc"
  printf '%s\n' "$out" > "${TMPDIR:-/tmp}/spec-raw-$name-c$conc.txt"
}

start_cinfer() {
  "$bin" serve -m "$model" --port $port -t "$threads" --spec-max-batch 64 "$@" >/dev/null 2>&1 &
  pid=$!
  wait_up
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; }

echo "# bench/spec.sh $(basename "$model") requests=$nreq output_len=$olen threads=$threads ($(date -u +%Y-%m-%dT%H:%MZ))"
start_cinfer; run cinfer-plain 1; stop
start_cinfer --speculative ngram; run cinfer-ngram 1; stop
if [ -x "$llama" ]; then
  # llama.cpp's n-gram drafters (this build: ngram-simple, ngram-map-k, ngram-mod, ngram-cache), each
  # with lookup lengths that suit short repeats; draft length 8 like cinfer's default k
  for cfg in "plain:" \
             "ngram-simple:--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 8" \
             "ngram-map-k:--spec-type ngram-map-k --spec-ngram-map-k-size-n 3 --spec-ngram-map-k-size-m 8" \
             "ngram-cache:--spec-type ngram-cache --spec-draft-n-max 8"; do
    name=${cfg%%:*}; args=${cfg#*:}
    # shellcheck disable=SC2086
    "$llama" -m "$model" --port $port -t "$threads" -c 4096 -np 1 $args >/dev/null 2>&1 & pid=$!
    if wait_up; then run "llama-$name" 1; else echo "llama-$name: did not start"; fi
    stop
  done
else
  echo "llama-server not found at $llama: llama.cpp rows skipped"
fi
for c in ${CROSS:-2 4 8}; do
  start_cinfer; run cinfer-plain "$c"; stop
  start_cinfer --speculative ngram; run cinfer-ngram "$c"; stop
done
