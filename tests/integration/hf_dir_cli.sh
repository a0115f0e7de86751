#!/usr/bin/env bash
# Acceptance (issue 22): the CLI takes a Hugging Face directory. `cinfer run -m DIR` and the
# same model after `cinfer convert hf DIR OUT.gguf` print the same greedy text (llama, sharded
# F32; deepseek_v3_fp8, FP8 weights: the converted BF16 copy may differ, so only that it runs);
# bad directories give one line on stderr and exit 1, and never a crash.
set -euo pipefail
bin=${CINFER_BIN:?}; src=${CINFER_SRC:?}
. "$(dirname "$0")/lib/fixture.sh"
need_fixture "$bin" "$src/tests/data/hf/llama/config.json" "$src/tests/data/hf/deepseek_v3_fp8/config.json"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dir="$src/tests/data/hf/llama"
"$bin" run -m "$dir" -p "Once upon a time" -n 12 --temp 0 >"$tmp/dir.txt" 2>"$tmp/dir.err"
"$bin" convert hf "$dir" "$tmp/llama.gguf" 2>/dev/null
"$bin" run -m "$tmp/llama.gguf" -p "Once upon a time" -n 12 --temp 0 >"$tmp/gguf.txt" 2>/dev/null
cmp "$tmp/dir.txt" "$tmp/gguf.txt" || { echo "directory and converted GGUF differ"; exit 1; }
"$bin" run -m "$src/tests/data/hf/deepseek_v3_fp8" -p "Hello" -n 4 --temp 0 >/dev/null 2>"$tmp/fp8.err" ||
  { cat "$tmp/fp8.err"; exit 1; }

bad() { # bad FILE CONTENT NEEDLE: a copy of the llama directory with FILE replaced must fail cleanly
  rm -rf "$tmp/bad"; cp -r "$dir" "$tmp/bad"
  if [ "$2" = "@truncated" ]; then head -c 300 "$dir/$1" >"$tmp/bad/$1"; else printf '%s' "$2" >"$tmp/bad/$1"; fi
  set +e; "$bin" run -m "$tmp/bad" -n 1 >/dev/null 2>"$tmp/bad.err"; rc=$?; set -e
  [ "$rc" = 1 ] || { echo "$1: exit $rc"; cat "$tmp/bad.err"; exit 1; }
  [ "$(wc -l <"$tmp/bad.err")" = 1 ] || { echo "$1: not one line:"; cat "$tmp/bad.err"; exit 1; }
  grep -qF -- "$3" "$tmp/bad.err" || { echo "$1: wanted '$3':"; cat "$tmp/bad.err"; exit 1; }
}
bad config.json '{"model_type":"gpt_neo"}' "config.json: field model_type"
bad tokenizer.json '{"model":{"type":"WordLevel"}}' "tokenizer.json: field model.type"
bad model-00001-of-00003.safetensors 'short' "field header length"
bad model-00002-of-00003.safetensors @truncated "model-00002-of-00003.safetensors: field header length"
set +e; "$bin" convert hf "$tmp/nonexistent" "$tmp/x.gguf" 2>"$tmp/c.err"; rc=$?; set -e
[ "$rc" = 1 ] && [ "$(wc -l <"$tmp/c.err")" = 1 ] || { echo "convert of a missing dir: exit $rc"; cat "$tmp/c.err"; exit 1; }
echo "hf directories: ok"
