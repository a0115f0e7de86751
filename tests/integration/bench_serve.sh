#!/bin/bash
# bench_serve.sh - `cinfer bench serve` against a live `cinfer serve` on
# stories260K (loopback, any free port): every workload, small, runs with 0
# errors; the results' token totals equal the sum of the per-request usage
# and the server's own /metrics counters (prompt, cached, generated) moved by
# exactly those totals; multi-turn and trace workloads get cache hits; trace
# replay records actual send times next to the planned (scaled) ones; --duration
# stops sending; --progress draws the bar; error
# kinds are counted; the conversations workload runs a closed loop (N
# sessions at once, each turn after the previous one plus think time); (prompt too long -> http_4xx, closed port -> connect);
# `bench report --svg` writes well-formed SVGs with labelled axes, units and a
# legend (parsed with python3's xml module).
set -u
BIN=${CINFER_BIN:?CINFER_BIN not set}
SHARED=${CINFER_SHARED:-$(dirname "$0")/../../../shared}
M=$SHARED/models/stories260K.gguf
TRACE=$SHARED/traces/mooncake_conversation_trace.jsonl
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$BIN" "$M" "$TRACE"
T=$(mktemp -d /tmp/cinfer-bench-serve-XXXXXX)
fail=0
check() { # name, expected, actual
    if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}

"$BIN" serve "$M" --port 0 -c 4096 -t 1 --log-level warn >"$T/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$T"' EXIT
PORT=
for _ in $(seq 1 100); do
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$T/server.log")
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || { echo "FAIL server did not start"; cat "$T/server.log"; exit 1; }
URL=http://127.0.0.1:$PORT
metrics() { python3 -c "
import sys, urllib.request
m = {}
for l in urllib.request.urlopen('$URL/metrics').read().decode().splitlines():
    if l and not l.startswith('#'):
        k, v = l.split()
        m[k.split('{model_name=')[0]] = float(v)
print(int(m['cinfer_prompt_tokens_total']), int(m['cinfer_cached_tokens_total']), int(m['cinfer_generation_tokens_total']))"; }

# run NAME EXPECTED_REQUESTS MIN_CACHE_RATIO ARGS...
run() {
    local name=$1 expect=$2 mincache=$3
    shift 3
    local before after
    before=$(metrics)
    "$BIN" bench serve --base-url "$URL" --no-progress --out "$T/$name.json" "$@" >"$T/$name.txt" 2>&1
    check "$name-rc" 0 $?
    after=$(metrics)
    python3 - "$T/$name.json" "$expect" "$mincache" "$before" "$after" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))
expect, mincache = int(sys.argv[2]), float(sys.argv[3])
before, after = [list(map(int, a.split())) for a in sys.argv[4:6]]
s, reqs = res["summary"], res["requests"]
assert s["requests_sent"] == expect and s["requests_ok"] == expect and len(reqs) == expect, (s["requests_ok"], expect)
assert all(v == 0 for v in s["errors"].values()), s["errors"]
assert all(r["error"] == "ok" and r["usage"] and r["http_status"] == 200 for r in reqs)
tot = [sum(r[k] for r in reqs) for k in ("prompt_tokens", "cached_tokens", "output_tokens")]
assert tot == [s["input_tokens"], s["cached_tokens"], s["output_tokens"]], (tot, s)
delta = [a - b for a, b in zip(after, before)]
assert delta == tot, ("server /metrics moved by", delta, "results say", tot)
assert s["computed_tokens"] == tot[0] - tot[1] and tot[2] > 0
assert abs(s["cache_hit_ratio"] - tot[1] / tot[0]) < 1e-9
assert s["cache_hit_ratio"] >= mincache, (s["cache_hit_ratio"], mincache)
for r in reqs:
    assert r["output_tokens"] <= r["max_tokens"] and r["ttft_s"] is not None
    assert 0 <= r["ttft_s"] <= r["e2e_s"] and r["sent_s"] >= r["planned_s"] - 1e-3
for k in ("ttft_ms", "e2e_ms", "tpot_ms", "itl_ms"):
    m = s[k]
    assert m["n"] > 0 and 0 <= m["p50"] <= m["p90"] <= m["p99"], (k, m)
print("  %d requests, input %d (cached %d), output %d, cache hit %.1f%%" % (expect, tot[0], tot[1], tot[2], 100 * s["cache_hit_ratio"]))
PY
    check "$name-usage" 0 $?
}

run synthetic 8 0 --workload synthetic --requests 8 --input-len 24 --output-len 8 --len-dist uniform --concurrency 3
run synthetic-ids 6 0 --api completions --workload synthetic --requests 6 --input-len 40 --output-len 8 --rate 50
run chat 9 0.3 --workload chat --sessions 3 --turns 3 --system-len 40 --user-len 6 --output-len 8
run agent 12 0.5 --workload agent --sessions 3 --turns 4 --system-len 40 --user-len 6 --tool-len 12 \
    --think-time 0.05 --output-len 8
run code 6 0.2 --workload code --requests 6 --input-len 60 --output-len 8 --concurrency 1
run trace 40 0.001 --api completions --workload trace "$TRACE" --max-requests 40 --block-scale 16 --time-scale 100 \
    --max-output-len 8
run trace-text 20 0.001 --workload trace "$TRACE" --max-requests 20 --block-scale 2 --time-scale 100 \
    --max-output-len 8 --requests 20
run conversations 16 0.05 --api completions --workload conversations "$TRACE" --max-requests 1500 --min-turns 3 \
    --turns 4 --conversations 5 --sessions 2 --block-scale 16 --time-scale 1000 --think-min 0.02 --think-max 0.05 \
    --max-output-len 4

# Closed-loop conversations: at most 2 sessions at once, started in order, each turn sent after the
# previous one ended plus its think time (>= 0.02 s), each turn the trace line's own content.
python3 - "$T/conversations.json" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))
by = {}
for r in res["requests"]:
    by.setdefault(r["session"], []).append(r)
spans = []
for s, rs in sorted(by.items()):
    rs.sort(key=lambda r: r["turn"])
    assert [r["turn"] for r in rs] == list(range(len(rs))), rs
    for a, b in zip(rs, rs[1:]):
        assert b["sent_s"] >= a["end_s"] + 0.02 - 1e-3, (s, a["end_s"], b["sent_s"])
        assert b["trace_line"] > a["trace_line"]
    spans.append((rs[0]["sent_s"], rs[-1]["end_s"]))
assert [len(by[s]) for s in sorted(by)] == [3, 3, 3, 4, 3], [len(by[s]) for s in sorted(by)]
starts = [a for a, _ in spans]
assert starts == sorted(starts), starts
for a, _ in spans:
    active = sum(1 for x, y in spans if x <= a < y)
    assert active <= 2, (a, spans)
assert spans[2][0] >= min(spans[0][1], spans[1][1]) - 1e-3, spans
assert res["config"]["sessions_at_once"] == 2 and res["config"]["workload"] == "conversations"
print("  %d sessions, at most 2 at once" % len(spans))
PY
check conversations-closed-loop 0 $?

# Trace replay timing: planned = scaled timestamps, actual send times recorded next to them.
python3 - "$TRACE" "$T/trace.json" <<'PY'
import json, sys
trace = [json.loads(l) for l, _ in zip(open(sys.argv[1]), range(40))]
res = json.load(open(sys.argv[2]))
t0 = trace[0]["timestamp"]
lags = []
for r in res["requests"]:
    want = (trace[r["trace_line"]]["timestamp"] - t0) / 1000 / 100
    assert abs(r["planned_s"] - want) < 1e-6, (r["planned_s"], want)
    lags.append(r["sent_s"] - r["planned_s"])
lags.sort()
assert lags[0] >= -1e-3 and lags[len(lags) // 2] < 0.25, lags
assert sorted(r["trace_line"] for r in res["requests"]) == list(range(40))
# The server's cache hits cannot beat the infinite-cache prefix bound at 16-token blocks.
seen, bound = set(), 0
for r in trace:
    n_in = max((len(r["hash_ids"]) - 1) * 16 + 1, min(len(r["hash_ids"]) * 16, -(-r["input_length"] * 16 // 512)))
    hits, chain = 0, ()
    for h in r["hash_ids"]:
        chain += (h,)
        if chain in seen and hits == len(chain) - 1:
            hits += 1
        seen.add(chain)
    bound += min(hits * 16, n_in)
cached = res["summary"]["cached_tokens"]
assert 0 < cached <= bound, (cached, bound)
print("  cached %d tokens of an infinite-cache bound of %d" % (cached, bound))
print("  send lag p50 %.1f ms, max %.1f ms" % (1e3 * lags[len(lags) // 2], 1e3 * lags[-1]))
PY
check trace-send-times 0 $?

# --duration stops sending (in-flight requests finish); --progress draws the bar on stderr.
"$BIN" bench serve --base-url "$URL" --progress --out "$T/dur.json" --workload synthetic --rate 20 --requests 1000 \
    --duration 0.5 --input-len 8 --output-len 4 >/dev/null 2>"$T/dur.err"
check duration-rc 0 $?
python3 -c "
import json, sys
s = json.load(open('$T/dur.json'))['summary']
sys.exit(not (0 < s['requests_sent'] < 100 and s['requests_ok'] == s['requests_sent']))"
check duration-stops 0 $?
grep -q "done, 0 in flight, 0 errors" "$T/dur.err"; check progress-bar 0 $?

# Errors are counted by kind; the run still succeeds when some requests do.
"$BIN" bench serve --base-url "$URL" --no-progress --out "$T/err.json" --workload synthetic --requests 3 \
    --input-len 3000 --output-len 4 >/dev/null 2>&1
check too-long-rc 1 $?
python3 -c "import json,sys; e=json.load(open('$T/err.json'))['summary']['errors']; sys.exit(e['http_4xx'] != 3)"
check too-long-http4xx 0 $?
"$BIN" bench serve --base-url http://127.0.0.1:1 --model x --no-progress --out "$T/conn.json" --requests 2 \
    --input-len 4 >/dev/null 2>&1
check closed-port-rc 1 $?
python3 -c "import json,sys; e=json.load(open('$T/conn.json'))['summary']['errors']; sys.exit(e['connect'] != 2)"
check closed-port-connect 0 $?
"$BIN" bench serve --base-url https://127.0.0.1:1 --model x >/dev/null 2>&1; check https-rc 1 $?

# Report: tables and SVG plots of several results.
"$BIN" bench report "$T/agent.json" "$T/trace.json" "$T/chat.json" --svg "$T/svg" >"$T/report.txt"
check report-rc 0 $?
python3 - "$T/svg" <<'PY'
import sys, os, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
files = ["ttft_cdf.svg", "tpot_cdf.svg", "e2e_cdf.svg", "throughput.svg", "cache_hit.svg", "summary.svg"]
for f in files:
    root = ET.parse(os.path.join(sys.argv[1], f)).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    texts = lambda cls: ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == cls]
    xl, yl = texts("xlabel"), texts("ylabel")
    assert xl and yl, (f, xl, yl)
    assert all("(" in l and ")" in l for l in yl), (f, yl)          # units
    if f != "summary.svg":
        assert "(" in xl[0], (f, xl)
    legend = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "legend"]
    names = ["".join(t.itertext()) for t in legend[0].iter("{http://www.w3.org/2000/svg}text")]
    assert names == ["agent", "trace", "chat"], (f, names)
    n_series = len(list(root.iter("{http://www.w3.org/2000/svg}polyline"))) or len(list(root.iter("{http://www.w3.org/2000/svg}rect")))
    assert n_series >= 3, (f, n_series)
print("  %d SVGs well-formed with labelled axes and legends" % len(files))
PY
check report-svg 0 $?
grep -q "^agent  .*%$" "$T/report.txt"; check report-table 0 $?
"$BIN" bench report "$T/server.log" >/dev/null 2>&1; check report-bad-rc 1 $?

kill $SERVER; wait $SERVER 2>/dev/null
exit $fail
