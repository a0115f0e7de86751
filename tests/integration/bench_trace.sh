#!/bin/bash
# bench_trace.sh - `cinfer bench trace-stats` on the real Mooncake conversation
# trace (count, token totals, the 37.4% infinite-cache prefix-hit bound at
# 512-token blocks), and `cinfer bench serve --dry-run --dump` trace replay:
# requests sharing leading hash ids share exactly those leading blocks of
# token ids (completions API) or words (chat API), and planned send times are
# the scaled timestamps; the conversations workload's grouping of the first
# 4,000 lines (the requests of bench/swa_replay_serve.sh). No server needed.
# Exit codes for bad input.
set -u
BIN=${CINFER_BIN:?CINFER_BIN not set}
SHARED=${CINFER_SHARED:-$(dirname "$0")/../../../shared}
TRACE=$SHARED/traces/mooncake_conversation_trace.jsonl
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$BIN" "$TRACE"
T=$(mktemp -d /tmp/cinfer-bench-trace-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # name, expected, actual
    if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}

"$BIN" bench trace-stats "$TRACE" > "$T/stats.txt"; check stats-rc 0 $?
field() { awk -v k="$1" 'index($0, k) == 1 { sub(k "[ ]*", ""); print; exit }' "$T/stats.txt"; }
check requests 12031 "$(field requests)"
check input-tokens 144793823 "$(field "input tokens")"
check output-tokens 4122048 "$(field "output tokens")"
check bound "37.4% (infinite cache)" "$(field "prefix-hit bound")"
"$BIN" bench trace-stats "$TRACE" --block-scale 32 --max-requests 100 > "$T/stats32.txt"; check stats32-rc 0 $?
grep -q "^requests *100$" "$T/stats32.txt"; check stats32-count 0 $?

"$BIN" bench trace-stats "$T/missing.jsonl" 2>/dev/null; check missing-rc 1 $?
echo '{"timestamp": 0}' > "$T/bad.jsonl"
"$BIN" bench trace-stats "$T/bad.jsonl" 2>"$T/err"; check bad-rc 1 $?
grep -q "line 1" "$T/err"; check bad-msg 0 $?
"$BIN" bench trace-stats 2>/dev/null; check noarg-rc 2 $?
"$BIN" bench serve --workload trace 2>/dev/null; check serve-notrace-rc 2 $?
"$BIN" bench serve --dry-run --workload bogus 2>/dev/null; check serve-badworkload-rc 2 $?
"$BIN" bench serve --dry-run --workload conversations 2>/dev/null; check conv-nofile-rc 2 $?
"$BIN" bench serve --dry-run --workload conversations "$TRACE" --think-min 2 --think-max 1 2>/dev/null
check conv-think-rc 2 $?
"$BIN" bench serve --dry-run --workload conversations "$TRACE" --rate 1 2>/dev/null; check conv-rate-rc 2 $?
"$BIN" bench serve --dry-run --workload conversations "$TRACE" --max-requests 3 --min-turns 3 2>"$T/err"
check conv-none-rc 1 $?
grep -q "no conversation of >= 3 turns" "$T/err"; check conv-none-msg 0 $?
"$BIN" bench serve --dry-run --api completions --workload conversations "$TRACE" --max-requests 4000 --min-turns 5 \
    --turns 8 --block-scale 128 --max-context 16384 --max-output-len 12 --conversations 8 --dump "$T/conv.jsonl" \
    >/dev/null
check conv-dump-rc 0 $?
# The 8 conversations bench/swa_replay_serve.sh replays: 48 turns, 201,061 prompt tokens (as bench/README.md says).
python3 -c "
import json, sys
d = [json.loads(l) for l in open('$T/conv.jsonl')]
sys.exit(not (len(d) == 48 and sum(len(x['body']['prompt']) for x in d) == 201061 and len({x['session'] for x in d}) == 8))"
check conv-dump-content 0 $?

for api in completions chat; do
    "$BIN" bench serve --dry-run --api $api --workload trace "$TRACE" --max-requests 300 --block-scale 16 \
        --time-scale 50 --max-output-len 64 --dump "$T/dump-$api.jsonl" >/dev/null
    check dump-$api-rc 0 $?
    python3 - "$TRACE" "$T/dump-$api.jsonl" $api <<'PY'
import json, sys
trace = [json.loads(l) for l, _ in zip(open(sys.argv[1]), range(300))]
dump = [json.loads(l) for l in open(sys.argv[2])]
api = sys.argv[3]
B = 16
assert len(dump) == 300, len(dump)
def content(d):
    b = d["body"]
    if api == "completions":
        assert isinstance(b["prompt"], list)
        return b["prompt"]
    return b["messages"][-1]["content"].split(" ")[:-1]   # every word ends with a space
t0 = trace[0]["timestamp"]
seqs = []
for d in dump:
    r = trace[d["trace_line"]]
    assert abs(d["send_at_s"] - (r["timestamp"] - t0) / 1000 / 50) < 1e-6, d["send_at_s"]
    assert d["body"]["max_tokens"] == min(r["output_length"], 64)
    c = content(d)
    n = len(r["hash_ids"])
    assert (n - 1) * B < len(c) <= n * B, (len(c), n)
    seqs.append((r["hash_ids"], c))
shared = differ = 0
for i in range(len(seqs)):
    for j in range(i + 1, len(seqs)):
        (hi, ci), (hj, cj) = seqs[i], seqs[j]
        L = 0
        while L < min(len(hi), len(hj)) and hi[L] == hj[L]:
            L += 1
        if L == 0:
            continue
        full = min(L * B, len(ci), len(cj))
        assert ci[:full] == cj[:full], (i, j, L)
        shared += 1
        if L < len(hi) and L < len(hj):   # the first differing block differs in content
            assert ci[L * B:(L + 1) * B] != cj[L * B:(L + 1) * B], (i, j, L)
            differ += 1
assert shared > 1000 and differ > 100, (shared, differ)
print("checked", len(dump), "requests,", shared, "pairs sharing a prefix")
PY
    check dump-$api-prefixes 0 $?
done
exit $fail
