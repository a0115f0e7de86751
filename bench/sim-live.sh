#!/usr/bin/env bash
# sim-live.sh MODEL.gguf [REQUESTS] - live validation of `cinfer sim` (docs/sim.md
# "Live validation"), in three steps:
#  1. live: one cinfer worker with serve's defaults, driven by `bench serve`
#     (synthetic generator, token ids, INPUT_LEN in / 16 out, Poisson at $RATE, seed 1;
#     with PREFIX_POOL, PREFIX_SHARE of each prompt is one of PREFIX_POOL shared prefixes);
#  2. calibration, right after and under the same load, on a fresh worker:
#     bench/sim-calibrate.py measures the worker's prefill mfu, decode bandwidth and
#     per-request overhead outside the forward passes from its own /metrics and
#     writes them into sim/hw/cpu-local.json (nothing is fitted to step 1's numbers);
#     `cinfer bench latency` is kept alongside for the machine's peaks;
#  3. `cinfer sim sim/clusters/cpu-local.json` on the same workload (same generator,
#     same seed), then bench/sim-compare.py prints live vs sim and the ratio of every
#     metric the criterion names. Exit status: sim-compare.py's (0 met, 3 not met).
# Results: bench/results/sim/live-* (live-TAG-* with TAG=...). ~2x REQUESTS/RATE seconds plus ~1 min on a quiet machine.
set -euo pipefail
usage="usage: bench/sim-live.sh MODEL.gguf [REQUESTS]  (live run vs cinfer sim with the calibrated CPU profile; RATE=req/s, default 0.1; INPUT_LEN (default 128); PREFIX_SHARE and PREFIX_POOL: a shared prefix per request, default none; TAG: results as live-TAG-*)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "sim-live.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
model=${1:?$usage}
n=${2:-16}
rate=${RATE:-0.1}
bin=${CINFER_BIN:-build/cinfer}
out=bench/results/sim
args=(--requests "$n" --input-len "${INPUT_LEN:-128}" --output-len 16 --rate "$rate" --seed 1)
if [ -n "${PREFIX_POOL:-}" ]; then args+=(--prefix-share "${PREFIX_SHARE:-0.5}" --prefix-pool "$PREFIX_POOL"); fi
live="$out/live${TAG:+-$TAG}"
port=$((20000 + RANDOM % 20000))
start=$(date +%s)
echo "sim-live.sh: $(date -u '+%F %T UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$live-run.log"
"$bin" serve -m "$model" --port "$port" -t 2 > "$live-server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
ready=0
for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/ready" > /dev/null && { ready=1; break; }
    kill -0 "$server" 2>/dev/null || break
    sleep 0.5
done
[ "$ready" = 1 ] || { echo "sim-live.sh: the server did not start (see $live-server.log)" >&2; exit 1; }
echo "1. live: $bin bench serve --api completions --ignore-eos ${args[*]}" | tee -a "$live-run.log"
"$bin" bench serve --base-url "http://127.0.0.1:$port" --api completions --ignore-eos --no-progress \
    "${args[@]}" --out "$live-serve.json" | tee "$live-serve.txt"
kill "$server"
wait "$server" 2>/dev/null || true
trap - EXIT
echo "2. calibration: bench/sim-calibrate.py $model --rate $rate (load $(cut -d' ' -f1 /proc/loadavg))" \
    | tee -a "$live-run.log"
CINFER_BIN=$bin python3 bench/sim-calibrate.py "$model" --rate "$rate" --log "$out/calibrate-server.log" \
    --out "$live-calibration.json" --write-profile sim/hw/cpu-local.json | tee "$live-calibration.txt"
"$bin" bench latency -m "$model" -p 128 -n 16 -t 2 | tee "$live-latency.txt"
echo "3. sim: $bin sim sim/clusters/cpu-local.json --workload synthetic ${args[*]}" | tee -a "$live-run.log"
"$bin" sim sim/clusters/cpu-local.json --workload synthetic "${args[@]}" -q \
    --out "$live-sim.json" | tee "$live-sim.txt"
rc=0
python3 bench/sim-compare.py "$live-serve.json" "$live-sim.json" | tee "$live-compare.txt" || rc=$?
echo "sim-live.sh: $(( $(date +%s) - start )) s, load at the end $(cut -d' ' -f1-3 /proc/loadavg)" \
    | tee -a "$live-run.log"
exit "$rc"
