#!/bin/bash
# pd_overlap.sh - TTFT through `cinfer router` + 1 prefill + 1 decode worker (issue 19, docs/router.md
# "PD mode"), the two steps overlapped (default: step 2 goes to D while P computes) against
# --pd-sequential (step 2 after step 1's answer), same workers, same requests, in one run, with one
# monolithic server (2 threads, same total cores) as the baseline. Load: `cinfer bench serve`
# synthetic completions, one request at a time (concurrency 1: TTFT is the path's latency, not
# queueing). Writes bench/results/pd-overlap-<label>.{txt,json}; prints TTFT/TPOT per setup.
# usage: bench/pd_overlap.sh MODEL.gguf [REQUESTS] [INPUT_LEN]
set -eu
usage="usage: bench/pd_overlap.sh MODEL.gguf [REQUESTS] [INPUT_LEN]  (PD TTFT, overlapped vs sequential steps)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "pd_overlap.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
BIN=${CINFER_BIN:-$here/../build/cinfer}
MODEL=${1:?$usage}
NREQ=${2:-12}
ILEN=${3:-1000}
OUT=$here/results
pids=()
tmp=$(mktemp -d)
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'cleanup; rm -rf "$tmp"' EXIT

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

run_bench() { # run_bench LABEL URL SEED: a new seed per setup, so no setup reuses another's prefixes
    "$BIN" bench serve --base-url "$2" --api completions --workload synthetic --requests "$NREQ" \
        --input-len "$ILEN" --output-len 16 --ignore-eos --concurrency 1 --seed "$3" \
        --out "$OUT/pd-overlap-$1.json" > "$OUT/pd-overlap-$1.txt" 2>&1
    echo "== $1"; grep -iE "ttft|tpot|successful" "$OUT/pd-overlap-$1.txt" | head -8
}

echo "# bench/pd_overlap.sh $MODEL $NREQ $ILEN  ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
serve_args=(serve "$MODEL" --ctx 4096 --kv-memory 0.25 --max-seqs 8)
start "$tmp/m.log" "$BIN" "${serve_args[@]}" -t 2
run_bench monolithic "http://127.0.0.1:$PORT" 1
cleanup
mkdir -p "$tmp/store"
start "$tmp/p.log" "$BIN" "${serve_args[@]}" -t 1 --role prefill --kv-store "$tmp/store" --handoff-timeout 30
pp=$PORT
start "$tmp/d.log" "$BIN" "${serve_args[@]}" -t 1 --role decode --kv-store "$tmp/store" --handoff-timeout 30
pd=$PORT
start "$tmp/r1.log" "$BIN" router --worker "http://127.0.0.1:$pp@prefill" --worker "http://127.0.0.1:$pd@decode" \
    --health-interval 0.2
sleep 0.5
run_bench pd-overlapped "http://127.0.0.1:$PORT" 2
kill "${pids[2]}"; wait "${pids[2]}" 2>/dev/null || true
start "$tmp/r2.log" "$BIN" router --worker "http://127.0.0.1:$pp@prefill" --worker "http://127.0.0.1:$pd@decode" \
    --health-interval 0.2 --pd-sequential
sleep 0.5
run_bench pd-sequential "http://127.0.0.1:$PORT" 3
curl -s "http://127.0.0.1:$PORT/metrics" | grep -E "^cinfer_router_handoffs_total" || true
curl -s "http://127.0.0.1:$pd/metrics" | grep -E "^cinfer_handoff_imported_blocks_total" || true
