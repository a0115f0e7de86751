#!/usr/bin/env bash
# Acceptance: `cinfer run` on stories260K (GGUF as shipped, and converted from llama2.c's .bin)
# greedy from BOS prints exactly llama2.c's text (BOS + 199 greedy tokens).
set -euo pipefail
bin=${CINFER_BIN:?}; shared=${CINFER_SHARED:-${CINFER_SRC:?}/../shared}
want="$shared/fixtures/llama2c/stories260K.run-c.steps200.txt"
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$bin" "$want" "$shared/models/stories260K.gguf" "$shared/models/stories260K.bin" "$shared/models/tok512.bin"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# The fixture is llama2.c's stdout for 200 steps from BOS plus the newline run.c adds at the end;
# `cinfer run -n 200` prints the same tokens' text and a final newline: byte-identical.
"$bin" run -m "$shared/models/stories260K.gguf" -n 200 --temp 0 --ctx 512 >"$tmp/out.txt" 2>"$tmp/err.txt"
cmp "$tmp/out.txt" "$want" || { echo "gguf: text differs"; diff "$tmp/out.txt" "$want" | head; exit 1; }
"$bin" convert llama2c "$shared/models/stories260K.bin" "$shared/models/tok512.bin" "$tmp/conv.gguf"
"$bin" run -m "$tmp/conv.gguf" -n 200 --temp 0 >"$tmp/conv.txt" 2>/dev/null
cmp "$tmp/conv.txt" "$want" || { echo "converted: text differs"; exit 1; }

# every kernel path gives the same greedy text (CINFER_CPU forces the path; the stderr line names it)
for isa in avx2 scalar; do
  CINFER_CPU=$isa "$bin" run -m "$shared/models/stories260K.gguf" -n 200 --temp 0 --ctx 512 >"$tmp/$isa.txt" 2>"$tmp/$isa.err"
  if grep -q "\[$isa," "$tmp/$isa.err"; then
    cmp "$tmp/$isa.txt" "$want" || { echo "$isa: text differs"; exit 1; }
  else
    echo "($isa not supported here: $(tail -1 "$tmp/$isa.err"))"
  fi
done
echo "all kernel paths: ok"
