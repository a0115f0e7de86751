#!/usr/bin/env bash
# bench/weights_memory.sh - the idle footprint and start-up time of `cinfer serve` (issue 25,
# bench/results/weights-memory.txt): starts `cinfer serve MODEL --port 0 --kv-memory 0.25 [ARGS]`,
# times it until the summary's URL line, waits 1 s, prints VmRSS / RssAnon / RssFile / VmLck
# (/proc/PID/status), the smaps_rollup totals and the summary's memory lines, then stops it.
# Usage: bench/weights_memory.sh MODEL.gguf [serve args...]   (CINFER_BIN: the binary; --help)
set -uo pipefail
usage="usage: bench/weights_memory.sh MODEL.gguf [SERVE-ARGS...]
Starts 'cinfer serve MODEL --port 0 --kv-memory 0.25 SERVE-ARGS' (binary: \$CINFER_BIN, default
build/cinfer), reports the time until it is ready and its idle resident memory
(VmRSS, RssAnon, RssFile, VmLck), then stops it.
  -h, --help   this text"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "weights_memory.sh: unknown option '$1' (see weights_memory.sh --help)" >&2; exit 2 ;;
  "") echo "weights_memory.sh: MODEL.gguf is required (see weights_memory.sh --help)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CINFER_BIN:-$root/build/cinfer}
model=$1; shift
log=$(mktemp)
t0=$(date +%s%N)
"$bin" serve "$model" --port 0 --kv-memory 0.25 "$@" 2>"$log" >/dev/null &
pid=$!
for _ in $(seq 3000); do
  grep -q "URL  " "$log" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.01
done
t1=$(date +%s%N)
if ! kill -0 $pid 2>/dev/null; then cat "$log"; rm -f "$log"; exit 1; fi
sleep 1
echo "ready after $(( (t1 - t0) / 1000000 )) ms"
grep -E "^(VmRSS|RssAnon|RssFile|VmLck)" /proc/$pid/status | tr -s ' \t' ' '
grep -E "^(Rss|Anonymous|AnonHugePages)" /proc/$pid/smaps_rollup | tr -s ' \t' ' '
grep -E "serve: (memory|weights from)" "$log"
kill $pid; wait $pid 2>/dev/null
rm -f "$log"
