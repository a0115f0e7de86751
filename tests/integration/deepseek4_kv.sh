#!/usr/bin/env bash
# deepseek4 (issue 15): `cinfer mkmodel --arch deepseek4` with the attention shape of DeepSeek-V4-Flash
# (43 layers: 2 window-only, then CSA / HCA alternating; latent 512, rope 64, indexer 64 x 128,
# top-k 512, window 128; tiny embedding and experts) loads in `cinfer run`, which prints the KV
# bytes per token of docs/deepseek4.md's arithmetic (compact layout): 21*(512 + 128)/4 + 20*512/128 =
# 3440 floats = 13760 B in the paged blocks, and a window ring per sequence of 2*512 + 21*(5*512 +
# 4*128) + 20*3*512 = 96256 floats = 385024 B per row; greedy generation runs. Also: a bad ratio list
# is one line + exit 1.
set -euo pipefail
bin=${CINFER_BIN:?}; shared=${CINFER_SHARED:-${CINFER_SRC:?}/../shared}
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$bin" "$shared/models/stories260K.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ratios=0,0; for i in $(seq 2 42); do ratios+=,$([ $((i % 2)) -eq 0 ] && echo 4 || echo 128); done
"$bin" mkmodel --arch deepseek4 --dim 64 --layers 43 --heads 1 --ffn 32 --head-dim 512 --qk-rope 64 --q-lora 32 \
  --o-groups 1 --o-lora 32 --ratios "$ratios" --window 128 --index-heads 64 --index-dim 128 --index-topk 512 \
  --experts 4 --experts-used 2 --expert-ffn 32 --hash-layers 3 --swiglu-limit 10 --expert-scale 1.5 \
  --yarn-factor 16 --yarn-orig-ctx 65536 --ctx 1048576 --vocab-from "$shared/models/stories260K.gguf" \
  --dtype q8_0 --seed 7 "$tmp/flash.gguf" 2>/dev/null
"$bin" run -m "$tmp/flash.gguf" -p "Once upon a time" -n 8 --temp 0 -c 256 >"$tmp/out.txt" 2>"$tmp/err.txt"
grep -q "KV cache 13760 bytes per token (21 CSA x 640 / 4 + 20 HCA x 512 / 128 floats x 4 B, deepseek4" \
  "$tmp/err.txt" || { echo "no / wrong KV size line"; cat "$tmp/err.txt"; exit 1; }
grep -q "KV window ring .* bytes per sequence (.* rows: .* of 385024 bytes" "$tmp/err.txt" ||
  { echo "no / wrong ring line"; cat "$tmp/err.txt"; exit 1; }
[ -s "$tmp/out.txt" ] || { echo "no output"; exit 1; }
"$bin" mkmodel --arch deepseek4 --dim 64 --layers 2 --heads 1 --ffn 32 --head-dim 64 --qk-rope 16 --q-lora 32 \
  --o-groups 1 --o-lora 32 --ratios 4,8 --experts 4 --experts-used 2 --expert-ffn 32 \
  --vocab-from "$shared/models/stories260K.gguf" --dtype f32 --seed 7 "$tmp/bad.gguf" 2>"$tmp/bad.err" && exit 1
[ "$(wc -l <"$tmp/bad.err")" -ge 1 ] && grep -q -- "--ratios" "$tmp/bad.err" || { cat "$tmp/bad.err"; exit 1; }
echo "deepseek4 kv: ok"
