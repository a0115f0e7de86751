#!/usr/bin/env bash
# Acceptance (issue 15, item 7): `cinfer run` on tiny-gemma2 (window/global layers, soft-caps) greedy for
# 64 tokens prints exactly llama.cpp's continuation of the fixture prompt (invalid UTF-8 replaced by
# U+FFFD as cinfer's streaming detokenizer writes it; the ids are checked in the unit tests) and reports
# the KV bytes: 13 global layers x 2 x 4 KV heads x 32 x 4 B = 13312 B per token, and a window ring per
# sequence (window 32 + batch - 1 rows, rounded up to 16, of 13312 B); `cinfer mkmodel --arch gemma2`
# writes a model that `cinfer run` loads; `cinfer serve` prints the rings in its start-up summary.
set -euo pipefail
bin=${CINFER_BIN:?}; shared=${CINFER_SHARED:-${CINFER_SRC:?}/../shared}
fx="$shared/fixtures/llama-cpp/tiny-gemma2.repeat.exactgelu.json"
vocab="$shared/fixtures/vocab/derived-vocab-tiny-gemma2.gguf"
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$bin" "$fx" "$shared/models/tiny/tiny-gemma2.gguf" "$vocab"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.stdout.buffer.write(bytes.fromhex(d["prompt_text_hex"])); open(sys.argv[2],"wb").write(bytes.fromhex(d["continuation_text_hex"]).decode("utf-8","replace").encode())' \
  "$fx" "$tmp/want.txt" >"$tmp/prompt.txt"
"$bin" run -m "$shared/models/tiny/tiny-gemma2.gguf" -f "$tmp/prompt.txt" -n 64 --temp 0 --ignore-eos --no-echo -b 20 \
  >"$tmp/out.txt" 2>"$tmp/err.txt"
printf '\n' >>"$tmp/want.txt" # cinfer run ends the output with a newline
cmp "$tmp/out.txt" "$tmp/want.txt" || { echo "continuation differs"; od -c "$tmp/out.txt" | head; od -c "$tmp/want.txt" | head; exit 1; }
grep -q "KV cache 13312 bytes per token (13 global layers x 2 x 4 KV heads x 32 x 4 B" "$tmp/err.txt" ||
  { echo "no KV size line"; cat "$tmp/err.txt"; exit 1; }
grep -q "KV window ring 851968 bytes per sequence (64 rows: window 32 + batch 20 - 1, of 13312 bytes" "$tmp/err.txt" ||
  { echo "no ring line"; cat "$tmp/err.txt"; exit 1; }
"$bin" mkmodel --arch gemma2 --dim 64 --layers 4 --heads 4 --kv-heads 2 --ffn 128 --head-dim 32 --window 24 \
  --swa-pattern 2 --attn-softcap 20 --final-softcap 10 --vocab-from "$vocab" --dtype q8_0 --seed 3 "$tmp/m.gguf" 2>/dev/null
"$bin" run -m "$tmp/m.gguf" -p "Hello" -n 8 --temp 0 -b 16 >"$tmp/m.txt" 2>"$tmp/m.err"
# 2 global layers x 2 x 2 x 32 x 4 B = 1024 B per token; ring: 2 window layers x 48 rows x 512 B
grep -q "KV cache 1024 bytes per token" "$tmp/m.err" || { echo "mkmodel model: no KV size line"; cat "$tmp/m.err"; exit 1; }
grep -q "KV window ring 49152 bytes per sequence (48 rows" "$tmp/m.err" || { echo "mkmodel: ring"; cat "$tmp/m.err"; exit 1; }
port=$((20000 + RANDOM % 20000))
"$bin" serve -m "$tmp/m.gguf" --port "$port" --max-seqs 4 >"$tmp/serve.out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do grep -q "URL" "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
kill "$pid"; wait "$pid" 2>/dev/null || true
grep -q "bytes per token in the global layers; window rings: 4 x" "$tmp/serve.out" ||
  { echo "serve summary: no ring line"; cat "$tmp/serve.out"; exit 1; }
echo "gemma2 run: ok"
