#!/usr/bin/env bash
# run-fuzzers.sh BUILD_DIR SECONDS [JOBS] - runs every fuzz_<name> harness built in BUILD_DIR for
# SECONDS each, JOBS harnesses at a time (default: the number of CPUs), starting from the
# committed seed corpus tests/fuzz/corpus/<name>/ (new inputs go to a scratch corpus under
# BUILD_DIR, never into the repository). Fails if any harness finds a crash; every failing
# harness's log tail is printed.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd); secs=${2:-20}; jobs=${3:-$(nproc)}
root=$(cd "$(dirname "$0")/.." && pwd)

run_one() { # run_one HARNESS: one harness, its log in fuzz-work/<name>.log; exit 1 on a finding
  local fz=$1 name work seeds
  name=$(basename "$fz"); name=${name#fuzz_}
  work="$build/fuzz-work/$name"; mkdir -p "$work"
  seeds="$root/tests/fuzz/corpus/$name"; [ -d "$seeds" ] || seeds=""
  if (cd "$build/fuzz-work" && ASAN_OPTIONS=detect_leaks=1 "$fz" -max_total_time="$secs" \
        -print_final_stats=0 -rss_limit_mb=2048 -timeout=10 "$work" $seeds >"$work.log" 2>&1); then
    echo "fuzz: $name ok ($(grep -Eo "Done [0-9]+ runs" "$work.log" | tail -1 || echo "?"))"
  else
    echo "fuzz: $name FAILED (log: $work.log)"; tail -40 "$work.log"; return 1
  fi
}
export -f run_one; export build secs root

harnesses=()
for fz in "$build"/fuzz_*; do [ -x "$fz" ] && harnesses+=("$fz"); done
[ ${#harnesses[@]} -gt 0 ] || { echo "fuzz: no harnesses in $build"; exit 1; }
echo "fuzz: ${#harnesses[@]} harnesses, ${secs}s each, $jobs at a time"
mkdir -p "$build/fuzz-work"
printf '%s\n' "${harnesses[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {}
