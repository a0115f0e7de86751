#!/bin/bash
# swa_replay_serve.sh - issue 16 compute-saved benchmark: total prefill FLOPs and TTFT of the agent
# workload and the Mooncake conversation trace through `cinfer bench serve`, on a window model whose
# sessions' window state expires between turns: bounded replay vs exact recompute vs no cache (and exact
# with snapshots kept, the upper bound) at equal cache capacity (bench/swa_replay_serve.py).
# usage: bench/swa_replay_serve.sh [MODEL.gguf] [THREADS]   (--help)
set -eu
usage="usage: bench/swa_replay_serve.sh [MODEL.gguf] [THREADS]
Prefill FLOPs and TTFT with bounded replay vs exact recompute vs no cache, on the agent workload and
the Mooncake conversation trace replayed through 'cinfer bench serve' (bench/swa_replay_serve.py).
Defaults: tiny-gemma2 from \$CINFER_SHARED (window 32), 2 threads. The window-state TTL (0.05 s) is
far below the think time, so window state expires between turns. Environment: MOONCAKE_REQUESTS
(lines of whole multi-turn conversations from the trace's head, default 24), MOONCAKE_BLOCK_SCALE
(tokens per hash block, default 8), SWA_BENCH_ONLY=agent|mooncake (one workload). Writes
bench/results/swa-replay-serve-<model>.txt.
  -h, --help   this text"
for a in "$@"; do
  case $a in
    -h|--help) printf '%s\n' "$usage"; exit 0 ;;
    -*) echo "swa_replay_serve.sh: unknown option '$a' (see swa_replay_serve.sh --help)" >&2; exit 2 ;;
  esac
done
if [ $# -gt 2 ]; then echo "swa_replay_serve.sh: at most 2 arguments (see swa_replay_serve.sh --help)" >&2; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$here/..
shared=${CINFER_SHARED:-$root/../shared}
bin=${CINFER_BIN:-$root/build/cinfer}
model=${1:-$shared/models/tiny/tiny-gemma2.gguf}
threads=${2:-2}
trace=$shared/traces/mooncake_conversation_trace.jsonl
py=${CINFER_VENV:-$root/.venv}/bin/python
[ -x "$py" ] || py=python3
out=$here/results/swa-replay-serve-$(basename "$model" .gguf).txt
{
    echo "# bench/swa_replay_serve.sh $model $threads   ($(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
    "$py" -u "$here/swa_replay_serve.py" "$bin" "$model" "$trace" "$threads"
} | tee "$out"
