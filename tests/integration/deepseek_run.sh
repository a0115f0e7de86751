#!/usr/bin/env bash
# Acceptance (DeepSeek issue): `cinfer run` on tiny-deepseek2 (MLA + MoE) greedy for 64 tokens prints
# exactly llama.cpp's continuation of the fixture prompt (with invalid UTF-8 replaced by U+FFFD, as
# cinfer's streaming detokenizer writes it; the token ids are checked in the unit tests), and reports the MLA KV cache size per
# token (4 layers x (64 latent + 16 rope) x 4 B = 1280 B); `cinfer mkmodel --arch deepseek2` writes
# a model that `cinfer run` loads (Q8_0, group-limited routing, no q_lora).
set -euo pipefail
bin=${CINFER_BIN:?}; shared=${CINFER_SHARED:-${CINFER_SRC:?}/../shared}
fx="$shared/fixtures/llama-cpp/tiny-deepseek2.once.json"
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$bin" "$fx" "$shared/models/tiny/tiny-deepseek2.gguf" "$shared/fixtures/vocab/derived-vocab-tiny-deepseek2.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.stdout.buffer.write(bytes.fromhex(d["prompt_text_hex"])); open(sys.argv[2],"wb").write(bytes.fromhex(d["continuation_text_hex"]).decode("utf-8","replace").encode())' \
  "$fx" "$tmp/want.txt" >"$tmp/prompt.txt"
"$bin" run -m "$shared/models/tiny/tiny-deepseek2.gguf" -f "$tmp/prompt.txt" -n 64 --temp 0 --ignore-eos --no-echo \
  >"$tmp/out.txt" 2>"$tmp/err.txt"
printf '\n' >>"$tmp/want.txt" # cinfer run ends the output with a newline
cmp "$tmp/out.txt" "$tmp/want.txt" || { echo "continuation differs"; od -c "$tmp/out.txt" | head; od -c "$tmp/want.txt" | head; exit 1; }
grep -q "KV cache 1280 bytes per token (4 layers x (64 latent + 16 rope) x 4 B, MLA)" "$tmp/err.txt" ||
  { echo "no KV size line"; cat "$tmp/err.txt"; exit 1; }
"$bin" mkmodel --arch deepseek2 --dim 128 --layers 3 --heads 4 --ffn 256 --kv-lora 64 --qk-nope 32 --qk-rope 16 \
  --v-head 32 --experts 16 --experts-used 4 --expert-ffn 64 --groups 4 --groups-used 2 \
  --vocab-from "$shared/fixtures/vocab/derived-vocab-tiny-deepseek2.gguf" --dtype q8_0 --seed 3 "$tmp/m.gguf" 2>/dev/null
"$bin" run -m "$tmp/m.gguf" -p "Hello" -n 8 --temp 0 >"$tmp/m.txt" 2>"$tmp/m.err"
grep -q "KV cache 960 bytes per token" "$tmp/m.err" || { echo "mkmodel model: no KV size line"; cat "$tmp/m.err"; exit 1; }
echo "deepseek2 run: ok"
