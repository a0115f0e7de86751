#!/usr/bin/env bash
# Acceptance: `cinfer run` on stories260K (GGUF as shipped, and converted from llama2.c's .bin)
# greedy from BOS prints exactly llama2.c's text (BOS + 199 greedy tokens).
set -euo pipefail
bin=${CINFER_BIN:?}; shared=${CINFER_SHARED:?}
want="$shared/fixtures/llama2c/stories260K.run-c.steps200.txt"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# The fixture is llama2.c's stdout for 200 steps from BOS plus the newline run.c adds at the end;
# `cinfer run -n 200` prints the same tokens' text and a final newline: byte-identical.
"$bin" run -m "$shared/models/stories260K.gguf" -n 200 --temp 0 --ctx 512 >"$tmp/out.txt" 2>"$tmp/err.txt"
cmp "$tmp/out.txt" "$want" || { echo "gguf: text differs"; diff "$tmp/out.txt" "$want" | head; exit 1; }
"$bin" convert llama2c "$shared/models/stories260K.bin" "$shared/models/tok512.bin" "$tmp/conv.gguf"
"$bin" run -m "$tmp/conv.gguf" -n 200 --temp 0 >"$tmp/conv.txt" 2>/dev/null
cmp "$tmp/conv.txt" "$want" || { echo "converted: text differs"; exit 1; }
echo "llama2c text: ok"
