#!/usr/bin/env bash
# grammar.sh - structured-output mask benchmark, cinfer's engine side by side with llguidance and
# xgrammar in one run, on the same vocabulary, schemas and token sequences (MaskBench method; see
# bench/bench_grammar.c and bench/grammar_peers.py). Single thread each.
# Usage: bench/grammar.sh VOCAB.gguf CASES.jsonl OUT_PREFIX
#   CASES.jsonl from bench/grammar_cases.py (a JSONSchemaBench checkout); writes
#   OUT_PREFIX.{cinfer,llguidance,xgrammar}.txt and OUT_PREFIX.compare.txt (bench/grammar_compare.py:
#   coverage side by side, llguidance-only schemas by keyword, mask times on the instances every
#   engine compiled and accepted). Env: BUILD (default build), GRAMMAR_VENV (a venv
#   with llguidance and xgrammar from PyPI, default /work/venvs/grammar), PEER_TIMEOUT (s, 1800),
#   CLOCK (cpu, the default: per-thread CPU time, which a loaded shared machine does not inflate;
#   or wall).
set -euo pipefail
usage="usage: bench/grammar.sh VOCAB.gguf CASES.jsonl OUT_PREFIX
env: BUILD (default build), GRAMMAR_VENV (default /work/venvs/grammar), PEER_TIMEOUT (seconds, 1800),
     CLOCK (cpu or wall, default cpu)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "grammar.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
[ $# -eq 3 ] || { echo "grammar.sh: expected VOCAB.gguf CASES.jsonl OUT_PREFIX (--help for usage)" >&2; exit 2; }
vocab=$1 cases=$2 out=$3
build=${BUILD:-build}
venv=${GRAMMAR_VENV:-/work/venvs/grammar}
dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT
clock=${CLOCK:-cpu}
"$build/bench_grammar" --vocab "$vocab" --cases "$cases" --dump "$dump" --clock "$clock" > "$out.cinfer.txt"
for engine in llguidance xgrammar; do
  timeout "${PEER_TIMEOUT:-1800}" "$venv/bin/python" "$(dirname "$0")/grammar_peers.py" --dump "$dump" \
    --cases "$cases" --engine "$engine" --clock "$clock" --eos "$(cat "$dump/eos.txt")" > "$out.$engine.txt" 2>&1 ||
    echo "($engine exited $?: timed out or failed)" >> "$out.$engine.txt"
done
python3 "$(dirname "$0")/grammar_compare.py" "$dump" > "$out.compare.txt"
tail -n 4 "$out".*.txt
