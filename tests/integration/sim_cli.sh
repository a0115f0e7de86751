#!/bin/bash
# sim_cli.sh - `cinfer sim` end to end: the repository's day-6 slice on a
# small synthetic workload and on the Mooncake conversation trace (block
# scaled, replicated), JSON results identical for the same seed (apart from
# wall time), the SVG charts, a retention sweep, and one-line errors with
# exit code 1 (bad files) or 2 (bad options) for bad input.
set -u
BIN=${CINFER_BIN:?CINFER_BIN not set}
SRC=${CINFER_SRC:-$(dirname "$0")/../..}
SHARED=${CINFER_SHARED:-$(dirname "$0")/../../../shared}
TRACE=$SHARED/traces/mooncake_conversation_trace.jsonl
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$BIN" "$TRACE"
T=$(mktemp -d /tmp/cinfer-sim-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # name, expected, actual
    if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
CL=$SRC/sim/clusters/deepseek-day6.json
run() { "$BIN" sim "$CL" -q -n 3000 --input-len 2000 --output-len 200 --uniform --rate 300 --prefix-share 0.5 \
    --prefix-pool 20 "$@"; }
run --seed 5 --out "$T/a.json" --svg "$T/svg" > "$T/a.txt"; check run-rc 0 $?
run --seed 5 --out "$T/b.json" > /dev/null; check rerun-rc 0 $?
strip() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("wall_s"); print(json.dumps(d, sort_keys=True))' "$1"; }
check same-seed "$(strip "$T/a.json")" "$(strip "$T/b.json")"
check done "3000" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"]["done"])' "$T/a.json")"
python3 - "$T/a.json" <<'PY'; check json-fields 0 $?
import json, sys
d = json.load(open(sys.argv[1]))
s = d["input_share"]
assert abs(s["cached_hbm"] + s["cached_store"] + s["replayed"] + s["computed"] - 1) < 1e-6, s
assert 0.3 < d["hit_rate"] < 0.6, d["hit_rate"]
assert d["ttft_s"]["p50"] > 0 and d["tpot_s"]["p99"] >= d["tpot_s"]["p50"] > 0
assert d["tokens_per_s"]["decode_output_per_node"] > 0 and d["economics"]["revenue"] > 0
assert 1 <= d["moe_imbalance"]["decode"] < 2
PY
for f in ttft_cdf tpot_cdf e2e_cdf hit tokens; do
    grep -q "</svg>" "$T/svg/$f.svg"; check "svg-$f" 0 $?
done
"$BIN" sim "$CL" -q --trace "$TRACE" --max-requests 300 --replicas 2 --time-scale 4 --out "$T/t.json" > /dev/null
check trace-rc 0 $?
check trace-count 600 "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"]["total"])' "$T/t.json")"
"$BIN" sim "$SRC/sim/clusters/retention.json" -q --store-only --workload sessions --sessions-per-s 0.002 \
    --duration 86400 --sweep retention-days=0.1,1 --out "$T/r.json" --svg "$T/rs" > /dev/null; check sweep-rc 0 $?
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r)==2 and r[1]["hit_rate"]>=r[0]["hit_rate"]' "$T/r.json"
check sweep-monotone 0 $?
grep -q "</svg>" "$T/rs/sweep_hit.svg"; check sweep-svg 0 $?

# bad input: one line, exit 1 (files) or 2 (options)
badrun() { # name, expected rc, expected text, args...
    local name=$1 rc=$2 want=$3; shift 3
    "$BIN" sim "$@" > /dev/null 2> "$T/err"; local got=$?
    check "$name-rc" "$rc" "$got"
    grep -q -- "$want" "$T/err"; check "$name-msg" 0 $?
    check "$name-lines" 1 "$(wc -l < "$T/err")"
}
mkdir -p "$T/c"
printf '{"model": "v3", "prefill": {"hardware": "h900", "instances": 1, "accelerators": 32}, "prices": "deepseek-r1"}' > "$T/c/hw.json"
badrun unknown-hw 1 "hw.json: prefill.hardware: unknown hardware 'h900'" "$T/c/hw.json" --profiles "$SRC/sim"
printf '{"model": "v3", "prefill": {"hardware": "h800", "instances": -1, "accelerators": 32}, "prices": "deepseek-r1"}' > "$T/c/neg.json"
badrun negative 1 "neg.json: prefill.instances" "$T/c/neg.json" --profiles "$SRC/sim"
printf '{"model": "v3", "prefill": {"hardware": "h800", "instances": 1, "accelerators": 4}, "prices": "deepseek-r1"}' > "$T/c/small.json"
badrun too-small 1 "too small for the model" "$T/c/small.json" --profiles "$SRC/sim"
printf '{"timestamp": 0, "input_length": 5000, "output_length": 1, "hash_ids": [1]}\n' > "$T/bad.jsonl"
badrun bad-trace 1 "bad.jsonl: line 1" "$CL" --trace "$T/bad.jsonl"
badrun bad-sweep 1 "sweep" "$CL" --sweep nosuch=1
badrun bad-option 2 "time-scale" "$CL" --time-scale -1
exit $fail
