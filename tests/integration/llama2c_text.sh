#!/usr/bin/env bash
# Acceptance: `cinfer run` on stories260K (GGUF as shipped, and converted from llama2.c's .bin)
# greedy from BOS prints exactly llama2.c's text (BOS + 199 greedy tokens).
set -euo pipefail
bin=${CINFER_BIN:?}; shared=${CINFER_SHARED:?}
want="$shared/fixtures/llama2c/stories260K.run-c.steps200.txt"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# llama2.c prints 199 tokens after BOS plus a final newline; -n 199 generates exactly those.
"$bin" run -m "$shared/models/stories260K.gguf" -n 199 --temp 0 --ctx 512 >"$tmp/out.txt" 2>"$tmp/err.txt"
cmp "$tmp/out.txt" "$want" || { echo "gguf: text differs"; diff <(cat "$tmp/out.txt") "$want" | head; exit 1; }
# -n 200 must start with the same text
"$bin" run -m "$shared/models/stories260K.gguf" -n 200 --temp 0 --ctx 512 >"$tmp/out200.txt" 2>/dev/null
head -c $(( $(wc -c <"$want") - 1 )) "$tmp/out200.txt" | cmp - <(head -c $(( $(wc -c <"$want") - 1 )) "$want")
"$bin" convert llama2c "$shared/models/stories260K.bin" "$shared/models/tok512.bin" "$tmp/conv.gguf"
"$bin" run -m "$tmp/conv.gguf" -n 199 --temp 0 >"$tmp/conv.txt" 2>/dev/null
cmp "$tmp/conv.txt" "$want" || { echo "converted: text differs"; exit 1; }
echo "llama2c text: ok"
