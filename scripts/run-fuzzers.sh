#!/usr/bin/env bash
# run-fuzzers.sh BUILD_DIR SECONDS - runs every fuzz_<name> harness built in BUILD_DIR for
# SECONDS each, starting from the committed seed corpus tests/fuzz/corpus/<name>/ (new inputs go
# to a scratch corpus under BUILD_DIR, never into the repository). Fails if any harness finds a crash.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd); secs=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
found=0
for fz in "$build"/fuzz_*; do
  [ -x "$fz" ] || continue
  found=1
  name=$(basename "$fz"); name=${name#fuzz_}
  work="$build/fuzz-work/$name"; mkdir -p "$work"
  seeds="$root/tests/fuzz/corpus/$name"; [ -d "$seeds" ] || seeds=""
  echo "fuzz: $name for ${secs}s"
  (cd "$build/fuzz-work" && ASAN_OPTIONS=detect_leaks=1 "$fz" -max_total_time="$secs" -print_final_stats=0 \
     -rss_limit_mb=2048 -timeout=10 "$work" $seeds >"$work.log" 2>&1) || {
    echo "fuzz: $name FAILED (log: $work.log)"; tail -40 "$work.log"; exit 1; }
  grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "$work.log" | tail -1 || true
done
[ $found -eq 1 ] || { echo "fuzz: no harnesses in $build"; exit 1; }
