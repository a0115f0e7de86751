#!/usr/bin/env bash
# sim-live.sh MODEL.gguf [REQUESTS] - live validation of `cinfer sim` (docs/sim.md):
# runs one cinfer worker with serve's defaults, drives it with `bench serve`
# (bench serve's synthetic generator, token ids, Poisson arrivals), then runs
# `cinfer sim` on the same workload (same generator, same seed) with the
# calibrated CPU profile (sim/clusters/cpu-local.json), and prints both.
# The CPU profile (sim/hw/cpu-local.json) is set from the calibration printed
# here (live-calibration.txt). Results: bench/results/sim/live-*.
set -eu
usage="usage: bench/sim-live.sh MODEL.gguf [REQUESTS]  (live run vs cinfer sim with the calibrated CPU profile; RATE=req/s)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "sim-live.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
model=${1:?usage: sim-live.sh MODEL.gguf [REQUESTS]}
n=${2:-16}
bin=${CINFER_BIN:-build/cinfer}
out=bench/results/sim
args=(--requests "$n" --input-len 128 --output-len 16 --rate "${RATE:-0.1}" --seed 1)
port=$((20000 + RANDOM % 20000))
"$bin" serve -m "$model" --port "$port" -t 2 > "$out/live-server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
ready=0
for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/ready" > /dev/null && { ready=1; break; }
    kill -0 "$server" 2>/dev/null || break
    sleep 0.5
done
[ "$ready" = 1 ] || { echo "sim-live.sh: the server did not start (see $out/live-server.log)" >&2; exit 1; }
"$bin" bench serve --base-url "http://127.0.0.1:$port" --api completions --ignore-eos --no-progress \
    "${args[@]}" --out "$out/live-serve.json" | tee "$out/live-serve.txt"
# calibrate the CPU profile right after, under the same load (same priority as the server)
"$bin" bench latency -m "$model" -p 128 -n 16 -t 2 | tee "$out/live-calibration.txt"
"$bin" sim sim/clusters/cpu-local.json --workload synthetic "${args[@]}" -q \
    --out "$out/live-sim.json" | tee "$out/live-sim.txt"
