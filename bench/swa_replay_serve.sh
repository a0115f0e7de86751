#!/bin/bash
# swa_replay_serve.sh - issue 16 compute-saved benchmark: total prefill FLOPs and TTFT of the agent
# workload and the Mooncake conversation trace through `cinfer bench serve`, on a window model whose
# sessions' window state expires between turns: bounded replay vs exact recompute vs no cache (and exact
# with snapshots kept, the upper bound) at equal cache capacity (bench/swa_replay_serve.py).
# usage: bench/swa_replay_serve.sh [MODEL.gguf] [THREADS] [-- OPTIONS of swa_replay_serve.py]   (--help)
set -eu
usage="usage: bench/swa_replay_serve.sh [MODEL.gguf] [THREADS] [-- OPTIONS]
Prefill FLOPs, TTFT and server CPU seconds with bounded replay vs exact recompute vs no cache, on the
agent workload ('cinfer bench serve') and the Mooncake conversation trace (closed loop: a fixed
number of sessions at once, each turn after the previous one completed plus its think time, so
every configuration sends the same requests; bench/swa_replay_serve.py, cinfer bench serve
--workload conversations).
Defaults: tiny-gemma2 from \$CINFER_SHARED (window 32), 2 threads. MODEL 'deepseek4' makes (once)
and uses a deepseek4 mkmodel with V4-Flash's window, \$MODELS/ds4w128.gguf (MODELS default
build/bench-models; W = 128, layers window / CSA / HCA / CSA, 8 experts). The window-state TTL (0.05 s) is
below every think time, so window state expires between turns. OPTIONS after '--' go to
swa_replay_serve.py (--workloads agent,mooncake, --agent-shape long|short, --lines N, --sessions N, --min-turns N,
--max-turns N, --concurrency N, --block-scale N, --time-scale X, --ctx N, --kv-memory GIB; see
'python3 bench/swa_replay_serve.py --help'). Exit status 1 when configurations completed
different requests. Writes bench/results/swa-replay-serve-<model>[-\$SWA_BENCH_TAG].txt.
  -h, --help   this text"
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) printf '%s\n' "$usage"; exit 0 ;;
    --) shift; break ;;
    -*) echo "swa_replay_serve.sh: unknown option '$1' (see swa_replay_serve.sh --help)" >&2; exit 2 ;;
    *) pos+=("$1"); shift ;;
  esac
done
if [ ${#pos[@]} -gt 2 ]; then echo "swa_replay_serve.sh: at most 2 arguments before '--' (see swa_replay_serve.sh --help)" >&2; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$here/..
shared=${CINFER_SHARED:-$root/../shared}
bin=${CINFER_BIN:-$root/build/cinfer}
model=${pos[0]:-$shared/models/tiny/tiny-gemma2.gguf}
if [ "$model" = deepseek4 ]; then
  model=${MODELS:-$root/build/bench-models}/ds4w128.gguf
  mkdir -p "$(dirname "$model")"
  [ -f "$model" ] || "$bin" mkmodel --arch deepseek4 --dim 128 --layers 4 --heads 4 --ffn 128 --head-dim 64 \
    --qk-rope 16 --q-lora 32 --o-groups 2 --o-lora 32 --ratios 0,4,128,4 --window 128 --index-heads 8 \
    --index-dim 64 --index-topk 16 --experts 8 --experts-used 2 --expert-ffn 64 --ctx 16384 \
    --vocab-from "$shared/models/tiny/tiny-gemma2.gguf" --dtype f32 --seed 3 "$model" >/dev/null
fi
threads=${pos[1]:-2}
trace=$shared/traces/mooncake_conversation_trace.jsonl
py=${CINFER_VENV:-$root/.venv}/bin/python
[ -x "$py" ] || py=python3
out=$here/results/swa-replay-serve-$(basename "$model" .gguf)${SWA_BENCH_TAG:+-$SWA_BENCH_TAG}.txt
set -o pipefail
{
    echo "# bench/swa_replay_serve.sh $model $threads${*:+ -- $*}   ($(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
    "$py" -u "$here/swa_replay_serve.py" "$bin" "$model" "$trace" "$threads" "$@"
} | tee "$out"
