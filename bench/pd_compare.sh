#!/bin/bash
# pd_compare.sh - the issue-19 serving benchmark: the same model, the same two cores and the same
# requests through
#   (a) one monolithic `cinfer serve -t 2` pinned to cores A,B            (config one-2t)
#   (b) two monolithic `cinfer serve -t 1`, one on core A, one on core B, behind `cinfer router`,
#       once per placement policy (round_robin, least_requests, cache_affinity, prefill_compute,
#       decode_load; and prefill_compute with a shared store and --store-shared), and once behind
#       the peer, SGLang's router (sglang-router from PyPI, --policy cache_aware)  (two-POLICY)
#   (c) `cinfer router` + 1 prefill worker (-t 1, core A) + 1 decode worker (-t 1, core B), KV
#       handed off over UCX (shared memory: both on 127.0.0.1), a shared store dir  (pd-1p1d)
# for two workloads of `cinfer bench serve`: the Mooncake conversation trace replayed in closed
# loop (`--workload conversations`, scaled by BLOCK_SCALE / TIME_SCALE) and the agent workload.
# Every run starts fresh workers (empty caches, empty store). The router and the load generator
# are not pinned (they are the same processes in every configuration that has a router).
# Everything listens on 127.0.0.1 only. Each bench run sends for at most RUN_LIMIT seconds (hard
# stop 180 s later), every process started is stopped on exit or signal (trap), and the per-run
# files go to OUT_DIR/RUN_NAME/; the table (bench/pd_compare.py) goes to OUT_DIR/RUN_NAME.txt with
# the command and the load average on top. Before a routed run it waits until the router reports
# every worker healthy (at most 15 s; otherwise it notes it in RUN_NAME/LABEL.note and goes on).
set -eu
usage() {
    cat <<'EOF'
usage: bench/pd_compare.sh [-h|--help] MODEL.gguf
Runs configurations (a) one monolithic server, (b) two servers behind `cinfer router` with each
policy, (c) router + 1 prefill + 1 decode worker, on the same 2 cores (taskset), for the Mooncake
conversation trace and the agent workload; writes OUT_DIR/RUN_NAME.txt (one table) and the raw
files in OUT_DIR/RUN_NAME/. Stops by itself (RUN_LIMIT per run) and stops what it started.
environment (defaults in brackets):
  CINFER_BIN [build/cinfer]  CINFER_SHARED [../shared]  OUT_DIR [bench/results]
  RUN_NAME [pd-compare]: the table is OUT_DIR/RUN_NAME.txt, the raw files OUT_DIR/RUN_NAME/
  CORES ["0 1"]: the two CPUs      WORKLOADS ["mooncake agent"]
  POLICIES ["round_robin least_requests cache_affinity prefill_compute decode_load prefill_compute-store
            sglang-cache_aware"]: cinfer router --policy P; P-store: with a shared store and
            --store-shared; sglang-cache_aware: the peer, SGLang's router (SGLANG_PY [.venv/bin/python]
            -m sglang_router.launch_router --policy cache_aware; left out when not installed)
  CONFIGS ["one two pd"]: which of (a) (b) (c) to run
  mooncake: CONVS [16] conversations, SESSIONS [8] at once, BLOCK_SCALE [5] words per hash id (text
            prompts, as SGLang's router takes no token-id prompts; ~3.2 tokens a word here),
            TIME_SCALE [100] (think time = trace gap / TIME_SCALE, at most THINK_MAX [2] s)
  agent:    AGENT_SESSIONS [8], AGENT_TURNS [5], SYSTEM_LEN [150], USER_LEN [20], TOOL_LEN [60]
            words, THINK [0.2] s
  OUTPUT_LEN [32] max output tokens (EOS ignored, greedy)
  SLO_TTFT_MS [2000]  SLO_TPOT_MS [60]: the goodput SLO
  RUN_LIMIT [300]: no new request after this many seconds of a run (in-flight ones finish;
            hard stop RUN_LIMIT + 180 s)
EOF
}
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  -*) echo "pd_compare.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
  "") usage >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
BIN=${CINFER_BIN:-$here/../build/cinfer}
MODEL=$1
SHARED=${CINFER_SHARED:-$here/../../shared}
TRACE=$SHARED/traces/mooncake_conversation_trace.jsonl
OUT_DIR=${OUT_DIR:-$here/results}
read -r CORE_A CORE_B <<<"${CORES:-0 1}"
WORKLOADS=${WORKLOADS:-mooncake agent}
POLICIES=${POLICIES:-round_robin least_requests cache_affinity prefill_compute decode_load prefill_compute-store sglang-cache_aware}
CONFIGS=${CONFIGS:-one two pd}
CONVS=${CONVS:-16} SESSIONS=${SESSIONS:-8} BLOCK_SCALE=${BLOCK_SCALE:-5} TIME_SCALE=${TIME_SCALE:-100}
THINK_MAX=${THINK_MAX:-2}
AGENT_SESSIONS=${AGENT_SESSIONS:-8} AGENT_TURNS=${AGENT_TURNS:-5} SYSTEM_LEN=${SYSTEM_LEN:-150}
USER_LEN=${USER_LEN:-20} TOOL_LEN=${TOOL_LEN:-60} THINK=${THINK:-0.2}
OUTPUT_LEN=${OUTPUT_LEN:-32} SLO_TTFT_MS=${SLO_TTFT_MS:-2000} SLO_TPOT_MS=${SLO_TPOT_MS:-60}
RUN_LIMIT=${RUN_LIMIT:-300}
SGLANG_PY=${SGLANG_PY:-$here/../.venv/bin/python}
if [[ " $POLICIES " == *" sglang-cache_aware "* ]] && ! "$SGLANG_PY" -c 'import sglang_router' 2>/dev/null; then
    echo "pd_compare.sh: $SGLANG_PY has no sglang_router (pip install sglang-router); the peer row is left out" >&2
    POLICIES=${POLICIES/sglang-cache_aware/}
fi
for f in "$BIN" "$MODEL" "$TRACE"; do [ -e "$f" ] || { echo "pd_compare.sh: missing $f" >&2; exit 1; }; done
command -v taskset >/dev/null || { echo "pd_compare.sh: needs taskset (util-linux)" >&2; exit 1; }

RUN_NAME=${RUN_NAME:-pd-compare}
RUN_DIR=$OUT_DIR/$RUN_NAME
mkdir -p "$RUN_DIR"
rm -f "$RUN_DIR"/*
tmp=$(mktemp -d)
pids=()
names=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
    names=()
}
trap 'cleanup; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

start() { # start NAME LOGFILE ARGS...: runs ARGS on a free port of 127.0.0.1; sets PORT
    local name=$1 log=$2
    shift 2
    "$@" --host 127.0.0.1 --port 0 >/dev/null 2>"$log" &
    pids+=($!)
    names+=("$name")
    PORT=
    for _ in $(seq 600); do
        PORT=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -1)
        [ -n "$PORT" ] && return
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "pd_compare.sh: did not start: $*" >&2
    cat "$log" >&2
    exit 1
}

# start_sglang WORKER_URL...: SGLang's router (PyPI sglang-router, $SGLANG_PY -m sglang_router.launch_router)
# with its cache_aware policy on a free port of 127.0.0.1; sets PORT once it answers GET /v1/models.
start_sglang() {
    PORT=$("$SGLANG_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$SGLANG_PY" -m sglang_router.launch_router --host 127.0.0.1 --port "$PORT" --policy cache_aware \
        --worker-urls "$@" --log-level warn >"$tmp/sg.log" 2>&1 &
    pids+=($!)
    names+=(router)
    for _ in $(seq 300); do
        curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && return
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.2
    done
    echo "pd_compare.sh: sglang router did not start; its row is left out" >&2
    cat "$tmp/sg.log" >&2
    return 1
}

# wait_healthy LABEL: until the router's /workers shows every worker healthy (at most 15 s); a worker
# still unhealthy then is noted in RUN_DIR/LABEL.note and the run goes on (the table shows the effect).
wait_healthy() {
    local n
    for _ in $(seq 75); do
        n=$(curl -sf "http://127.0.0.1:$ROUTER_PORT/workers" |
            python3 -c 'import json, sys; print(sum(not w["healthy"] for w in json.load(sys.stdin)["workers"]))' 2>/dev/null) || n=x
        [ "$n" = 0 ] && return 0
        sleep 0.2
    done
    echo "router: $n worker(s) not healthy 15 s after start: $(curl -sf "http://127.0.0.1:$ROUTER_PORT/workers")" \
        > "$RUN_DIR/$1.note"
    echo "pd_compare.sh: $1: $n worker(s) not healthy in the router after 15 s (see $1.note)" >&2
}

cpu_ticks() { # cpu_ticks PID: utime + stime in clock ticks
    awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

ATTN=$(python3 "$here/pd_compare.py" attn-cost "$MODEL")
serve_args=(serve "$MODEL" --ctx 4096 --kv-memory 0.25 --max-seqs 16 --log-level warn)
router_args=(router --health-interval 0.2 --attn-cost "$ATTN" --log-level warn)
HZ=$(getconf CLK_TCK)

bench_args() { # bench_args WORKLOAD: the load generator's options (same for every configuration)
    case $1 in
      mooncake) echo "--api completions --text --workload conversations $TRACE --block-scale $BLOCK_SCALE" \
                     "--time-scale $TIME_SCALE --think-max $THINK_MAX --sessions $SESSIONS" \
                     "--conversations $CONVS --max-context 4096 --max-output-len $OUTPUT_LEN" ;;
      agent) echo "--api chat --workload agent --sessions $AGENT_SESSIONS --turns $AGENT_TURNS" \
                  "--system-len $SYSTEM_LEN --user-len $USER_LEN --tool-len $TOOL_LEN --think-time $THINK" \
                  "--output-len $OUTPUT_LEN" ;;
      *) echo "pd_compare.sh: unknown workload '$1'" >&2; exit 2 ;;
    esac
}

# run LABEL WORKLOAD URL WORKER=PORT...: one bench run against URL; /metrics of every worker before
# and after, the router's (if any) after, the workers' CPU seconds over the run.
run() {
    local label=$1 wl=$2 url=$3
    shift 3
    local w name port i
    for w in "$@"; do
        curl -sf "http://127.0.0.1:${w#*=}/metrics" | grep '^cinfer_' > "$RUN_DIR/$label.${w%%=*}.before.prom" || true
    done
    # the model name from a worker (SGLang's router answers /v1/models with "unknown")
    local model
    model=$(curl -sf "http://127.0.0.1:${1#*=}/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')
    local -a t0=()
    for i in "${!pids[@]}"; do t0[i]=$(cpu_ticks "${pids[i]}"); done
    # shellcheck disable=SC2046 # bench_args is a word list on purpose
    # --duration: no new request after RUN_LIMIT s (the run then ends with what is in flight, and
    # the results count only what was sent); timeout is the backstop. In the background, so a
    # signal to this script is handled at once (the trap stops everything).
    timeout -k 10 $((RUN_LIMIT + 180)) "$BIN" bench serve --base-url "$url" $(bench_args "$wl") --model "$model" \
        --ignore-eos --temperature 0 --timeout 120 --seed 1 --no-progress --duration "$RUN_LIMIT" \
        --out "$RUN_DIR/$label.json" > "$RUN_DIR/$label.txt" 2>&1 &
    pids+=($!)
    names+=(client)
    local rc=0
    wait "${pids[-1]}" || rc=$?
    [ "$rc" = 0 ] || echo "(bench serve exit $rc)" >> "$RUN_DIR/$label.txt"
    for w in "$@"; do
        name=${w%%=*} port=${w#*=}
        curl -sf "http://127.0.0.1:$port/metrics" | grep '^cinfer_' > "$RUN_DIR/$label.$name.after.prom" || true
    done
    : > "$RUN_DIR/$label.cpu"
    for i in "${!pids[@]}"; do
        [ "${names[i]}" = router ] || [ "${names[i]}" = client ] && continue
        echo "${names[i]} $(awk -v a="${t0[i]}" -v b="$(cpu_ticks "${pids[i]}")" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }')" \
            >> "$RUN_DIR/$label.cpu"
    done
    if [ -n "${ROUTER_PORT:-}" ]; then
        curl -sf "http://127.0.0.1:$ROUTER_PORT/metrics" | grep '^cinfer_router' > "$RUN_DIR/$label.router.prom" || true
        curl -sf "http://127.0.0.1:$ROUTER_PORT/workers" > "$RUN_DIR/$label.workers.json" || true
    fi
    echo "== $label: $(grep -E 'successful requests' "$RUN_DIR/$label.txt" | tr -s ' ') (load $(cut -d' ' -f1-3 /proc/loadavg))"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%FT%TZ)
for wl in $WORKLOADS; do
    bench_args "$wl" >/dev/null
    if [[ " $CONFIGS " == *" one "* ]]; then
        ROUTER_PORT=
        start w0 "$tmp/w0.log" taskset -c "$CORE_A,$CORE_B" "$BIN" "${serve_args[@]}" -t 2
        p0=$PORT
        curl -sf "http://127.0.0.1:$p0/load" | python3 -c 'import json,sys; print(json.load(sys.stdin)["kv_block_tokens"])' \
            > "$RUN_DIR/block_tokens"
        run "$wl-one-2t" "$wl" "http://127.0.0.1:$p0" "w0=$p0"
        cleanup
    fi
    if [[ " $CONFIGS " == *" two "* ]]; then
        for pol in $POLICIES; do
            store=() rflags=()
            if [ "$pol" = prefill_compute-store ]; then
                rm -rf "$tmp/store" && mkdir -p "$tmp/store"
                store=(--kv-store "$tmp/store") rflags=(--store-shared)
            fi
            start w0 "$tmp/w0.log" taskset -c "$CORE_A" "$BIN" "${serve_args[@]}" -t 1 "${store[@]}"
            p0=$PORT
            start w1 "$tmp/w1.log" taskset -c "$CORE_B" "$BIN" "${serve_args[@]}" -t 1 "${store[@]}"
            p1=$PORT
            if [ "$pol" = sglang-cache_aware ]; then # the peer: SGLang's router in front of the same workers
                start_sglang "http://127.0.0.1:$p0" "http://127.0.0.1:$p1" || { cleanup; continue; }
                ROUTER_PORT=
                url="http://127.0.0.1:$PORT"
            else
                start router "$tmp/r.log" "$BIN" "${router_args[@]}" --policy "${pol%-store}" "${rflags[@]}" \
                    --worker "http://127.0.0.1:$p0" --worker "http://127.0.0.1:$p1"
                ROUTER_PORT=$PORT
                url="http://127.0.0.1:$ROUTER_PORT"
                wait_healthy "$wl-two-$pol"
            fi
            run "$wl-two-$pol" "$wl" "$url" "w0=$p0" "w1=$p1"
            cleanup
        done
    fi
    if [[ " $CONFIGS " == *" pd "* ]]; then
        rm -rf "$tmp/store" && mkdir -p "$tmp/store"
        start p "$tmp/p.log" taskset -c "$CORE_A" "$BIN" "${serve_args[@]}" -t 1 --role prefill \
            --kv-store "$tmp/store" --handoff-timeout 30
        pp=$PORT
        start d "$tmp/d.log" taskset -c "$CORE_B" "$BIN" "${serve_args[@]}" -t 1 --role decode \
            --kv-store "$tmp/store" --handoff-timeout 30
        pd=$PORT
        curl -sf "http://127.0.0.1:$pd/handoff/info" > "$RUN_DIR/$wl-pd-1p1d.handoff-info.json" || true
        start router "$tmp/r.log" "$BIN" "${router_args[@]}" \
            --worker "http://127.0.0.1:$pp@prefill" --worker "http://127.0.0.1:$pd@decode"
        ROUTER_PORT=$PORT
        wait_healthy "$wl-pd-1p1d"
        run "$wl-pd-1p1d" "$wl" "http://127.0.0.1:$ROUTER_PORT" "p=$pp" "d=$pd"
        cleanup
    fi
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

{
    echo "# CINFER_SHARED=$SHARED RUN_NAME=$RUN_NAME bench/pd_compare.sh $MODEL"
    echo "# settings: CORES='$CORE_A $CORE_B' WORKLOADS='$WORKLOADS' CONFIGS='$CONFIGS' POLICIES='$POLICIES'"
    echo "#   CONVS=$CONVS SESSIONS=$SESSIONS BLOCK_SCALE=$BLOCK_SCALE TIME_SCALE=$TIME_SCALE THINK_MAX=$THINK_MAX"
    echo "#   AGENT_SESSIONS=$AGENT_SESSIONS AGENT_TURNS=$AGENT_TURNS SYSTEM_LEN=$SYSTEM_LEN USER_LEN=$USER_LEN TOOL_LEN=$TOOL_LEN THINK=$THINK"
    echo "#   OUTPUT_LEN=$OUTPUT_LEN SLO_TTFT_MS=$SLO_TTFT_MS SLO_TPOT_MS=$SLO_TPOT_MS RUN_LIMIT=$RUN_LIMIT router --attn-cost $ATTN"
    echo "# started $started, ended $(date -u +%FT%TZ); load average at start $load_start, at end $load_end"
    echo "# $(nproc) CPUs on the machine; workers pinned with taskset; router and load generator not pinned"
    echo "# mooncake: $(bench_args mooncake)"
    echo "# agent:    $(bench_args agent)"
    echo "# both: --ignore-eos --temperature 0 --seed 1; raw files: bench/results/$RUN_NAME/"
    echo
    python3 "$here/pd_compare.py" table "$RUN_DIR" "$MODEL" "$SLO_TTFT_MS" "$SLO_TPOT_MS"
} > "$OUT_DIR/$RUN_NAME.txt"
cat "$OUT_DIR/$RUN_NAME.txt"
