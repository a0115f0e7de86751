#!/usr/bin/env bash
# bench/spec.sh - speculative decoding benchmark (bench/results/spec-*.txt): single-stream
# generation on the `code` workload of `cinfer bench serve` (concurrency 1, greedy, ignore EOS),
# one configuration after another in one run, on the same model and prompts:
#   cinfer plain, cinfer --speculative ngram, cinfer --speculative draft (--draft DRAFT.gguf),
#   llama-server plain, with each of its n-gram drafters, and with the draft model
#   (/work/llama/build/bin/llama-server or $LLAMA_SERVER, started with --no-repack: the shared
#   build's repacked AMX path crashes on this VM), then the best llama.cpp speculative row;
# then the crossover: cinfer at concurrency $CROSS (default 2 4 8) with and without n-gram drafts.
# $LLAMA_ROWS (names, default all: plain ngram-simple ngram-map-k ngram-mod ngram-cache draft) picks
# the llama-server rows (each takes minutes on a loaded machine).
# Each row: output tok/s (bench serve, wall), the server process's CPU seconds over the row and
# output tokens per CPU second (the proxy for an unloaded machine on a shared VM), and the
# acceptance length (tokens per verify = accepted drafts / verifies + 1; cinfer from /metrics,
# llama.cpp from its per-request "mean len" log lines).
# Usage: bench/spec.sh MODEL.gguf [--draft DRAFT.gguf] [--requests N] [--output-len N] [--threads N]
set -euo pipefail
usage="usage: bench/spec.sh MODEL.gguf [--draft DRAFT.gguf] [--requests N] [--output-len N] [--threads N]
Single-stream tok/s on the code workload: cinfer plain / n-gram / draft model vs llama-server
plain / n-gram drafters / draft model (when available), then the concurrency crossover (\$CROSS).
  --draft FILE   a smaller GGUF with the same vocabulary: the draft-model rows (skipped without)
  -h, --help     this text"
model="" ; draft="" ; nreq=4 ; olen=96 ; threads=2
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) printf '%s\n' "$usage"; exit 0 ;;
    --draft) draft=$2; shift 2 ;;
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
log=$(mktemp "${TMPDIR:-/tmp}/spec-server.XXXXXX")
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -f "$log"; }
trap cleanup EXIT

wait_up() { for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0; sleep 0.2; done; return 1; }
# CPU seconds (user + system) the server process has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$pid/stat"; }

best_name="" ; best_tpot=""
# run NAME CONCURRENCY: bench serve against the server on $port; prints one summary line.
run() {
  local name=$1 conc=$2 out c0 c1 ntok
  c0=$(cpu_s)
  out=$("$bin" bench serve --base-url "http://127.0.0.1:$port" --workload code --concurrency "$conc" \
        --requests $((nreq * conc)) --input-len 256 --output-len "$olen" --ignore-eos --temperature 0 \
        --api completions --text --no-progress 2>&1)
  c1=$(cpu_s)
  printf '%s\n' "$out" > "${TMPDIR:-/tmp}/spec-raw-$name-c$conc.txt"
  local tps tpot acc=""
  tps=$(printf '%s\n' "$out" | awk '/output tokens\/s|Output token throughput|output tok\/s/ {print $NF; exit}')
  tpot=$(printf '%s\n' "$out" | awk '/time per output token/ {print "tpot_ms_mean=" $5; exit}')
  ntok=$((nreq * conc * olen))
  if [[ $name == cinfer* ]]; then
    acc=$(curl -s "http://127.0.0.1:$port/metrics" | awk '
      /^cinfer_spec_accepted_tokens_total/ {a += $2} /^cinfer_spec_verifies_total/ {v += $2}
      /^cinfer_spec_draft_tokens_total/ {d += $2}
      END { if (v > 0) printf "drafted=%d accepted=%d verifies=%d accept_len=%.2f", d, a, v, a / v + 1 }')
  else
    acc=$(awk '/draft acceptance/ { split($0, p, "mean len = "); n++; s += p[2] + 0;
                 match($0, /\( *[0-9]+ accepted/); a += substr($0, RSTART + 1, RLENGTH - 10) + 0 }
               END { if (n > 0) printf "accepted=%d accept_len=%.2f (mean of %d requests)", a, s / n, n }' "$log")
  fi
  echo "$name conc=$conc output_tok_s=$tps cpu_s=$(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.1f", b - a}') tok_per_cpu_s=$(awk -v a="$c0" -v b="$c1" -v n="$ntok" 'BEGIN{printf "%.2f", n / (b - a)}') | $tpot | $acc"
  # the best llama.cpp speculative row: the lowest decode time per token (output tok/s is
  # printed to 0.1 and includes the prefill)
  local t=${tpot#tpot_ms_mean=}
  if [[ $name == llama-* && $name != llama-plain && -n $t ]] &&
     awk -v a="$t" -v b="$best_tpot" 'BEGIN{exit !(b == "" || a < b)}'; then
    best_name=$name; best_tpot=$t
  fi
}

start_cinfer() {
  "$bin" serve -m "$model" --port $port -t "$threads" --spec-max-batch 64 "$@" >"$log" 2>&1 &
  pid=$!
  wait_up
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; }

echo "# bench/spec.sh $(basename "$model") draft=$(basename "${draft:-none}") requests=$nreq output_len=$olen threads=$threads ($(date -u +%Y-%m-%dT%H:%MZ))"
start_cinfer; run cinfer-plain 1; stop
start_cinfer --speculative ngram; run cinfer-ngram 1; stop
if [ -n "$draft" ]; then start_cinfer --draft-model "$draft" --speculative draft; run cinfer-draft 1; stop; fi
if [ -x "$llama" ]; then
  # llama.cpp's n-gram drafters (ngram-simple, ngram-map-k, ngram-mod, ngram-cache) with lookup
  # lengths that suit short repeats and drafts of up to 8 like cinfer's default k; its draft model
  cfgs=("plain:"
        "ngram-simple:--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 8"
        "ngram-map-k:--spec-type ngram-map-k --spec-ngram-map-k-size-n 3 --spec-ngram-map-k-size-m 8"
        "ngram-mod:--spec-type ngram-mod --spec-ngram-mod-n-match 4 --spec-ngram-mod-n-min 1 --spec-ngram-mod-n-max 8"
        "ngram-cache:--spec-type ngram-cache --spec-draft-n-max 8")
  [ -z "$draft" ] || cfgs+=("draft:--spec-type draft-simple --spec-draft-model $draft --spec-draft-n-max 8 -td $threads")
  for cfg in "${cfgs[@]}"; do
    name=${cfg%%:*}; args=${cfg#*:}
    [ -z "${LLAMA_ROWS:-}" ] || [[ " $LLAMA_ROWS " == *" $name "* ]] || continue
    # shellcheck disable=SC2086
    # --poll 0: its workers sleep instead of spinning (on a shared, oversubscribed VM a spinning
    # worker waits for a descheduled one; cinfer's pool spins briefly, then sleeps on a futex)
    "$llama" -m "$model" --port $port -t "$threads" -c 4096 -np 1 --no-repack --poll 0 $args >"$log" 2>&1 & pid=$!
    if wait_up; then run "llama-$name" 1; else echo "llama-$name: did not start ($(tail -1 "$log"))"; fi
    stop
  done
  echo "llama-best-speculative: ${best_name:-none} tpot_ms_mean=$best_tpot"
else
  echo "llama-server not found at $llama: llama.cpp rows skipped"
fi
for c in ${CROSS:-2 4 8}; do
  start_cinfer; run cinfer-plain "$c"; stop
  start_cinfer --speculative ngram; run cinfer-ngram "$c"; stop
done
