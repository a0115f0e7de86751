#!/bin/bash
# cli_serve.sh - `cinfer serve` start-up through the binary: the port is bound before the
# model loads (a busy port fails in well under a second with a clear message, even when the
# model file would fail to load), the start-up summary (architecture, parameters, weight
# dtypes, KV capacity, threads/ISA, store, API keys, URL), --port=N, several
# --served-model-name (listed by /v1/models, any accepted, the requested one echoed, the
# first by default), and /metrics (model_name on every sample, cinfer_kv_cache_usage_ratio,
# cinfer_build_info).
set -u
BIN=${CINFER_BIN:?CINFER_BIN not set}
SHARED=${CINFER_SHARED:-$(dirname "$0")/../../../shared}
M=$SHARED/models/stories260K.gguf
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
fail=0
check() { # name, expected, actual
    if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
contains() { # name, needle, haystack
    case "$3" in *"$2"*) echo "ok   $1" ;; *) echo "FAIL $1: [$2] not in [$3]"; fail=1 ;; esac
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# a busy port: held by a listener for the duration
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$T/busy" &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$T/busy" ] && break; sleep 0.1; done
BUSY=$(cat "$T/busy")
t0=$(date +%s%N)
out=$("$BIN" serve "$SHARED/no-such-model.gguf" --port "$BUSY" 2>&1); rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check busy-rc 1 $rc
# the port error, not the model's: the bind happened first
check busy-msg "cinfer: serve: cannot listen on 127.0.0.1:$BUSY: the port is already in use (choose another with --port, or --port 0 for any free port)" "$out"
[ "$ms" -lt 1000 ] && echo "ok   busy-fast ($ms ms)" || { echo "FAIL busy-fast: $ms ms"; fail=1; }
out=$("$BIN" serve "$M" --port "$BUSY" 2>&1); check busy-real-model-rc 1 $?

# a real start: --port=N, several names, the summary
PORT=$(free_port)
"$BIN" serve "$M" --port="$PORT" --ctx 256 -t 1 --served-model-name a,b --served-model-name c 2>"$T/log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on" "$T/log" && break; sleep 0.1; done
log=$(cat "$T/log")
contains listening "listening on http://127.0.0.1:$PORT" "$log"
contains sum-model "model        'a', 'b', 'c'" "$log"
contains sum-arch "architecture llama, 5 layers" "$log"
contains sum-params "parameters   292.8K total, 292.8K active per token" "$log"
contains sum-weights "weights      f32 x " "$log"
contains sum-kv "KV cache     " "$log"
contains sum-compute "compute      1 threads, kernels " "$log"
contains sum-store "store        none" "$log"
contains sum-keys "API keys     0" "$log"
contains sum-url "URL          http://127.0.0.1:$PORT/v1" "$log"
U=http://127.0.0.1:$PORT
check models "a b c" "$(curl -s "$U/v1/models" | python3 -c 'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin)["data"]))')"
chat() { curl -s "$U/v1/chat/completions" -H 'Content-Type: application/json' -d "$1" |
    python3 -c 'import json,sys; b=json.load(sys.stdin); print(b.get("model") or b["error"]["code"])'; }
check echo-b b "$(chat '{"model": "b", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}')"
check echo-c c "$(chat '{"model": "c", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}')"
check echo-default a "$(chat '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}')"
check other-model model_not_found "$(chat '{"model": "zzz", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}')"
check model-get b "$(curl -s "$U/v1/models/b" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
met=$(curl -s "$U/metrics")
check metrics-unlabelled "" "$(printf '%s\n' "$met" | grep -v '^#' | grep -v '{model_name="a"[,}]')"
contains metrics-usage 'cinfer_kv_cache_usage_ratio{model_name="a"} 0' "$met"
contains metrics-build 'cinfer_build_info{model_name="a",version="' "$met"
contains metrics-status 'cinfer_requests_total{model_name="a",status="404"} 1' "$met"
exit $fail
