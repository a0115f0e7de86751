#!/usr/bin/env bash
# bench/peak_memory.sh - runs one `cinfer bench latency` (a short prefill and decode) on MODEL and
# samples its memory every 0.2 s: peak VmRSS, RssAnon, RssFile (/proc/PID/status) and the lowest
# MemAvailable of the machine while it ran; for models near the machine's RAM (issue 25: the
# DeepSeek-V2-Lite-shaped Q8_0 with all 27 layers, bench/results/deepseek-v2-lite-L27-q8_0-*.txt).
# Usage: bench/peak_memory.sh MODEL.gguf [BENCH-LATENCY-ARGS...]   ($CINFER_BIN; --help)
set -uo pipefail
usage="usage: bench/peak_memory.sh MODEL.gguf [BENCH-LATENCY-ARGS...]
Runs 'cinfer bench latency -m MODEL -p 16 -n 8 -r 1 -t 2 --bw-mib 64 ARGS' (binary: \$CINFER_BIN,
default build/cinfer) and reports its wall time, output, peak VmRSS / RssAnon / RssFile and the
machine's lowest MemAvailable while it ran.
  -h, --help   this text"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "peak_memory.sh: unknown option '$1' (see peak_memory.sh --help)" >&2; exit 2 ;;
  "") echo "peak_memory.sh: MODEL.gguf is required (see peak_memory.sh --help)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CINFER_BIN:-$root/build/cinfer}
model=$1; shift
avail() { awk '$1=="MemAvailable:"{print int($2/1024)}' /proc/meminfo; }
echo "# cinfer bench latency -m $(basename "$model") -p 16 -n 8 -r 1 -t 2 --bw-mib 64 $*"
echo "# $(date -u '+%Y-%m-%d %H:%M'), load $(cut -d' ' -f1 /proc/loadavg), MemAvailable before $(avail) MB, model $(( $(stat -c %s "$model") / 1048576 )) MB"
out=$(mktemp)
t0=$(date +%s%N)
"$bin" bench latency -m "$model" -p 16 -n 8 -r 1 -t 2 --bw-mib 64 "$@" >"$out" 2>&1 &
pid=$!
peak_rss=0 peak_anon=0 peak_file=0 low_avail=$(avail)
while kill -0 $pid 2>/dev/null; do
  if [ -r /proc/$pid/status ]; then
    read -r r a f < <(awk '$1=="VmRSS:"{r=$2} $1=="RssAnon:"{a=$2} $1=="RssFile:"{f=$2} END{print r+0, a+0, f+0}' /proc/$pid/status 2>/dev/null)
    [ "${r:-0}" -gt $peak_rss ] && peak_rss=$r
    [ "${a:-0}" -gt $peak_anon ] && peak_anon=$a
    [ "${f:-0}" -gt $peak_file ] && peak_file=$f
  fi
  v=$(avail); [ "$v" -lt "$low_avail" ] && low_avail=$v
  sleep 0.2
done
wait $pid; rc=$?
t1=$(date +%s%N)
cat "$out"; rm -f "$out"
echo "exit $rc after $(( (t1 - t0) / 1000000 )) ms; peak VmRSS $((peak_rss / 1024)) MB, RssAnon $((peak_anon / 1024)) MB, RssFile $((peak_file / 1024)) MB; lowest MemAvailable $low_avail MB"
exit $rc
