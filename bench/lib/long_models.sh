# bench/lib/long_models.sh - a sourced library, not a program (bench/lib holds no entry points),
# used by bench/deepseek4.sh and bench/mla_longctx.sh: the two 2-layer models of issue 15's
# long-context comparison, made once with `cinfer mkmodel` (same dim, heads, q-lora, experts;
# deepseek4 with one CSA and one HCA layer, V3-shaped MLA with kv-lora 512 + rope 64).
# Needs $bin (cinfer), $models (directory) and $vocab (a GGUF whose vocabulary is copied).
long_ds4() {
  local f="$models/ds4-long-L2-q8_0.gguf"
  [ -f "$f" ] || "$bin" mkmodel --arch deepseek4 --dim 1024 --layers 2 --heads 16 --ffn 512 --head-dim 512 \
    --qk-rope 64 --q-lora 512 --o-groups 4 --o-lora 512 --ratios 4,128 --window 128 --index-heads 64 \
    --index-dim 128 --index-topk 512 --experts 32 --experts-used 6 --expert-ffn 512 --shared-experts 1 \
    --swiglu-limit 10 --ctx 65536 --vocab-from "$vocab" --dtype q8_0 --seed 7 "$f" >/dev/null 2>&1
  echo "$f"
}
long_mla() {
  local f="$models/v3-mla-L2-q8_0.gguf"
  [ -f "$f" ] || "$bin" mkmodel --arch deepseek2 --dim 1024 --layers 2 --heads 16 --ffn 512 --kv-lora 512 \
    --qk-nope 128 --qk-rope 64 --v-head 128 --q-lora 512 --experts 32 --experts-used 6 --expert-ffn 512 \
    --shared-experts 1 --dense-layers 0 --ctx 65536 --vocab-from "$vocab" --dtype q8_0 --seed 7 "$f" \
    >/dev/null 2>&1
  echo "$f"
}
