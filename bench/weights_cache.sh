#!/usr/bin/env bash
# bench/weights_cache.sh - footprint and time to ready of `cinfer serve` with and without the
# repacked-weights cache, side by side with llama-server on the same file in the same run
# (issue 25; results in bench/results/weights-cache-*.txt).
# For MODEL it measures, alternating the servers ROUNDS times (median reported):
#   - time from exec until GET /health answers 200 (both servers answer only once ready), for
#     llama-server, `cinfer serve` without a cache, the first start with an empty cache directory
#     (it writes the cache) and the second start (cache present, warm page cache);
#   - the idle memory 1 s after ready: VmRSS, RssAnon, RssFile (/proc/PID/status) and Pss
#     (/proc/PID/smaps_rollup);
#   - two servers of each kind on the model at once: their summed Pss (pages shared count once).
# Usage: bench/weights_cache.sh MODEL.gguf [ROUNDS]   ($CINFER_BIN, $LLAMA_SERVER; --help)
set -uo pipefail
usage="usage: bench/weights_cache.sh MODEL.gguf [ROUNDS]
Measures time to ready and idle memory of llama-server (\$LLAMA_SERVER, default
/work/llama/build/bin/llama-server, run with --no-repack: weights mmap'd and used in place) and 'cinfer serve' (\$CINFER_BIN, default build/cinfer)
without a weights cache, with an empty one (first start) and with one present (second start),
ROUNDS times each (default 3), alternating; then two of each at once (summed Pss).
The cache directory is a scratch directory removed at the end.
  -h, --help   this text"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "weights_cache.sh: unknown option '$1' (see weights_cache.sh --help)" >&2; exit 2 ;;
  "") echo "weights_cache.sh: MODEL.gguf is required (see weights_cache.sh --help)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CINFER_BIN:-$root/build/cinfer}
llama=${LLAMA_SERVER:-/work/llama/build/bin/llama-server}
model=$1
rounds=${2:-3}
[ -f "$model" ] || { echo "weights_cache.sh: no such model: $model" >&2; exit 1; }
[ -x "$llama" ] || { echo "weights_cache.sh: llama-server not found at $llama" >&2; exit 1; }
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
C=$T/cache
ms() { echo $(( $(date +%s%N) / 1000000 )); }
free_port() { # a port nothing listens on
  local p
  while :; do p=$((20000 + RANDOM % 20000)); ss -ltn | grep -q ":$p " || { echo $p; return; }; done
}
# launch KIND PORT LOG: starts one server in the background, sets PID. cinfer gets --port 0 (it
# binds before loading and prints the port it got); llama-server gets PORT.
launch() {
  case $1 in
    llama) "$llama" -m "$model" --port "$2" -t 2 -c 2048 -np 1 --no-repack >"$3" 2>&1 & ;;
    cinfer) "$bin" serve "$model" --port 0 -t 2 --kv-memory 0.25 >"$3" 2>&1 & ;;
    cinfer-cache) "$bin" serve "$model" --port 0 -t 2 --kv-memory 0.25 --weights-cache "$C" >"$3" 2>&1 & ;;
  esac
  PID=$!
  PIDS+=($PID)
}
# ready KIND PORT PID LOG: waits for /health 200 (cinfer: on the port its log names); prints ms since $t0
ready() {
  local port=$2
  for _ in $(seq 6000); do
    if [ "$1" != llama ]; then
      port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$4" | head -1)
    fi
    [ -n "$port" ] && curl -sf -m 60 -o /dev/null "http://127.0.0.1:$port/health" &&
      { echo $(( $(ms) - t0 )); return 0; }
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.01
  done
  return 1
}
mem() { # PID: "VmRSS RssAnon RssFile Pss" in MiB
  local st=/proc/$1/status
  local r a f p
  r=$(awk '$1=="VmRSS:"{print $2}' $st); a=$(awk '$1=="RssAnon:"{print $2}' $st); f=$(awk '$1=="RssFile:"{print $2}' $st)
  p=$(awk '$1=="Pss:"{print $2}' /proc/$1/smaps_rollup)
  echo "$((r / 1024)) $((a / 1024)) $((f / 1024)) $((p / 1024))"
}
# one KIND LABEL: start, time to ready, idle memory, stop; appends "LABEL ms VmRSS RssAnon RssFile Pss"
# (llama-server: a new port when another process took the one picked)
one() {
  local port t try
  for try in 1 2 3; do
    port=$(free_port)
    t0=$(ms)
    launch "$1" "$port" "$T/$2.log"
    t=$(ready "$1" "$port" "$PID" "$T/$2.log") && break
    kill $PID 2>/dev/null; wait $PID 2>/dev/null
    grep -qi "address already in use\|already in use\|couldn't bind" "$T/$2.log" || try=3
    [ $try = 3 ] && { echo "$2: did not become ready"; tail -5 "$T/$2.log"; return 1; }
  done
  sleep 1
  echo "$2 $t $(mem $PID)" >>"$T/rows"
  kill $PID; wait $PID 2>/dev/null
}
size_mb=$(( $(stat -c %s "$model") / 1048576 ))
echo "# bench/weights_cache.sh $(basename "$model") $rounds   ($(date -u '+%Y-%m-%d %H:%M'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), machine shared with other jobs)"
echo "# model file $size_mb MiB; llama-server: -t 2 -c 2048 -np 1 --no-repack (mmap, warmup on; its default AMX repack crashes on this VM: ldtilecfg SIGSEGV); cinfer serve: -t 2 --kv-memory 0.25"
: >"$T/rows"
for r in $(seq "$rounds"); do
  one llama llama-server
  one cinfer "cinfer(no-cache)"
  rm -rf "$C"; one cinfer-cache "cinfer(cache-first)"
  one cinfer-cache "cinfer(cache-second)"
done
grep -h "weights from\|memory  " "$T"/cinfer*.log | sort -u | sed 's/^/# /'
echo
printf '%-22s %8s %8s %8s %8s %8s   (medians of %d; MiB)\n' server ready_ms VmRSS RssAnon RssFile Pss "$rounds"
for k in llama-server "cinfer(no-cache)" "cinfer(cache-first)" "cinfer(cache-second)"; do
  awk -v k="$k" '$1 == k' "$T/rows" | sort -k2,2n | awk -v k="$k" -v n="$rounds" '
    { t[NR] = $2; r[NR] = $3; a[NR] = $4; f[NR] = $5; p[NR] = $6 }
    END { m = int((NR + 1) / 2); printf "%-22s %8d %8d %8d %8d %8d\n", k, t[m], r[m], a[m], f[m], p[m] }'
done
echo
echo "# every run (server ready_ms VmRSS RssAnon RssFile Pss):"
sed 's/^/#   /' "$T/rows"
echo
# two at once: summed Pss (shared pages count once in the sum)
pair() { # KIND LABEL
  local p1 p2 a b
  p1=$(free_port); launch "$1" "$p1" "$T/$2-1.log"; a=$PID
  p2=$(free_port); while [ "$p2" = "$p1" ]; do p2=$(free_port); done
  launch "$1" "$p2" "$T/$2-2.log"; b=$PID
  t0=$(ms)
  ready "$1" "$p1" $a "$T/$2-1.log" >/dev/null && ready "$1" "$p2" $b "$T/$2-2.log" >/dev/null ||
    { echo "$2: pair did not start"; kill $a $b 2>/dev/null; wait $a $b 2>/dev/null; return 1; }
  sleep 1
  local m1 m2; m1=$(mem $a); m2=$(mem $b)
  echo "$2 x2: process 1 [VmRSS RssAnon RssFile Pss] = $m1; process 2 = $m2; summed Pss $(( $(echo $m1 | cut -d' ' -f4) + $(echo $m2 | cut -d' ' -f4) )) MiB"
  kill $a $b; wait $a $b 2>/dev/null
}
pair llama llama-server
pair cinfer "cinfer(no-cache)"
pair cinfer-cache "cinfer(cache)"
