#!/bin/bash
# router_policies.sh - the router's placement policies on a trace (issue 19 benchmark, first slice):
# (a) one `cinfer serve` with 2 threads, (b) two `cinfer serve` with 1 thread each (same total cores)
# behind `cinfer router`, once per policy, fresh workers (empty caches) each time. Load: `cinfer bench
# serve` replaying the Mooncake conversation trace scaled to this machine. Writes
# bench/results/router-policies-<label>.{txt,json} and prints one summary line per run.
# usage: bench/router_policies.sh MODEL.gguf [MAX_REQUESTS] [BLOCK_SCALE] [TIME_SCALE]
set -eu
usage="usage: bench/router_policies.sh MODEL.gguf [MAX_REQUESTS] [BLOCK_SCALE] [TIME_SCALE]  (router policies on the Mooncake trace)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "router_policies.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
BIN=${CINFER_BIN:-$here/../build/cinfer}
MODEL=${1:?usage: router_policies.sh MODEL.gguf [MAX_REQUESTS] [BLOCK_SCALE] [TIME_SCALE]}
NREQ=${2:-40}
BLOCK=${3:-16}
TSCALE=${4:-4}
SHARED=${CINFER_SHARED:-$here/../../shared}
TRACE=$SHARED/traces/mooncake_conversation_trace.jsonl
OUT=$here/results
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap cleanup EXIT

start() { # start LOGFILE ARGS...: runs ARGS on a free port; sets PORT, remembers the pid
    local log=$1; shift
    "$@" --port 0 >/dev/null 2>"$log" &
    pids+=($!)
    PORT=
    for _ in $(seq 600); do
        PORT=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -1)
        [ -n "$PORT" ] && return
        sleep 0.1
    done
    echo "did not start: $*" >&2; cat "$log" >&2; exit 1
}

run_bench() { # run_bench LABEL URL
    "$BIN" bench serve --base-url "$2" --api completions --workload trace "$TRACE" --max-requests "$NREQ" \
        --block-scale "$BLOCK" --time-scale "$TSCALE" --max-output-len 16 --ignore-eos \
        --out "$OUT/router-policies-$1.json" > "$OUT/router-policies-$1.txt" 2>&1
    echo "== $1"; grep -iE "ttft|tpot|cache|goodput|throughput|requests" "$OUT/router-policies-$1.txt" | head -12
}

serve_args=(serve "$MODEL" --ctx 4096 --kv-memory 0.25 --max-seqs 16)
tmp=$(mktemp -d)
start "$tmp/one.log" "$BIN" "${serve_args[@]}" -t 2
run_bench one-server "http://127.0.0.1:$PORT"
cleanup
for policy in round_robin least_requests cache_affinity prefill_compute decode_load; do
    start "$tmp/w1.log" "$BIN" "${serve_args[@]}" -t 1
    p1=$PORT
    start "$tmp/w2.log" "$BIN" "${serve_args[@]}" -t 1
    p2=$PORT
    start "$tmp/r.log" "$BIN" router --worker "http://127.0.0.1:$p1" --worker "http://127.0.0.1:$p2" \
        --policy "$policy" --health-interval 0.2
    pr=$PORT
    sleep 0.5
    run_bench "two-$policy" "http://127.0.0.1:$pr"
    curl -s "http://127.0.0.1:$pr/workers" > "$OUT/router-policies-two-$policy.workers.json"
    cleanup
done
rm -rf "$tmp"
