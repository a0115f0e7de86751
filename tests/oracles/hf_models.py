#!/usr/bin/env python3
"""hf_models.py - tiny random Hugging Face model directories and their logits,
the oracle for cinfer's HF directory loader (tests/unit/model/test_hf_dir.c).

Needs torch (CPU), transformers and tokenizers, kept out of the project venv:
    python3 -m venv /work/venvs/hf && /work/venvs/hf/bin/pip install torch transformers tokenizers
    /work/venvs/hf/bin/python tests/oracles/hf_models.py tests/data/hf [FAMILY...]

For each family (llama F32 with a llama3-style byte-level BPE tokenizer, qwen2
BF16 with tied embeddings, Q/K/V biases and the qwen2 pre-tokenizer, mistral F16
with a GPT-2 byte-level tokenizer, deepseek_v3 BF16 with MLA and MoE, qwen3 BF16 with
Q/K norms and head_dim != hidden/heads) it trains a small BPE tokenizer on a fixed
text, builds a random model with a fixed seed, saves both with save_pretrained
(safetensors; llama sharded into two files with an index) and writes
logits.json: the prompt's token ids and every position's logits, computed in
float32 from the saved weights (BF16/F16 weights widened), and the `tokenizers`
encodings of a few fixture strings (tokens.json)."""
import json
import os
import sys

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
import transformers

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 2024 and we've got 12345 tokens!",
    "Hello world, hello tokenizer; numbers 3.14159 and 42 or 1000000.",
    "Once upon a time there was a little model that could count to ten: one two three.",
    "def main():\n    print('hi')\n    return 0\n",
    "Grüße aus München! Ça va? 日本語のテキスト。",
] * 20
STRINGS = ["Hello world", "It's 2024, isn't it?", "  two  spaces\n\nnew lines\t tab",
           "Grüße 日本語 🙂", "def f(x):\n    return x*1000"]
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]


def make_tokenizer(pattern):
    tok = Tokenizer(models.BPE())
    if pattern is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=384, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def build(name, out_dir, cfg_cls, model_cls, dtype, pattern, extra, shard, quantize=False):
    torch.manual_seed(1234)
    tok = make_tokenizer(pattern)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    bos, eos = tok.token_to_id(SPECIALS[0]), tok.token_to_id(SPECIALS[2])
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": SPECIALS[0], "eos_token": SPECIALS[2], "add_bos_token": True,
                   "chat_template": "{% for m in messages %}<|begin_of_text|>{{ m['role'] }}: {{ m['content'] }}"
                                    "<|eot_id|>{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"}, f)
    dims = dict(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
                rope_theta=10000.0, bos_token_id=bos, eos_token_id=eos)
    dims.update(extra)
    cfg = cfg_cls(**dims)
    model = model_cls(cfg).eval()
    with torch.no_grad():  # random norms, so a wrong norm mapping shows
        for n, p in model.named_parameters():
            if "norm" in n:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif "bias" in n:
                p.copy_(0.1 * torch.randn_like(p))
    model = model.to(dtype)
    model.generation_config.temperature = 0.7
    model.generation_config.top_p = 0.9
    model.generation_config.do_sample = True
    model.save_pretrained(d, safe_serialization=True, max_shard_size="150KB" if shard else "50GB")
    if quantize:  # projections to FP8 + block scales; the reference model gets the dequantized weights
        from safetensors.torch import load_file, save_file
        path = os.path.join(d, "model.safetensors")
        tensors, out = load_file(path), {}
        for k, v in tensors.items():
            if k.endswith("_proj.weight") and v.dim() == 2:
                q, sc = fp8_quantize(v)
                out[k], out[k + "_scale_inv"] = q, sc
                tensors[k] = (q.float() * sc.repeat_interleave(128, 0)[:v.shape[0]]
                              .repeat_interleave(128, 1)[:, :v.shape[1]])  # float32: exact q * scale
            else:
                out[k] = v.contiguous()
        save_file(out, path, metadata={"format": "pt"})
        with open(os.path.join(d, "config.json")) as f:
            cfg_json = json.load(f)
        cfg_json["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                           "weight_block_size": [128, 128]}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg_json, f, indent=2)
        # the reference: the dequantized weights through from_pretrained (which maps the per-expert file
        # names onto the model's own parameter layout)
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp, safe_serialization=True)
            save_file({k: v.float().contiguous() for k, v in tensors.items()}, os.path.join(tmp, "model.safetensors"),
                      metadata={"format": "pt"})
            model = model_cls.from_pretrained(tmp, dtype=torch.float32)
    if not quantize:
        # the reference reads the saved weights into a float32 model: model.to(float32) would keep the
        # bf16-rounded RoPE inv_freq buffer (visible once Q/K norms make attention sharp, as in qwen3)
        model = model_cls.from_pretrained(d, dtype=torch.float32)
    ref = model.to(torch.float32)
    ids = [bos] + tok.encode("Once upon a time, the quick brown fox counted 12345!").ids
    with torch.no_grad():
        logits = ref(torch.tensor([ids])).logits[0]
    with open(os.path.join(d, "logits.json"), "w") as f:
        json.dump({"ids": ids, "logits": [[round(float(x), 6) for x in row] for row in logits]}, f)
    with open(os.path.join(d, "tokens.json"), "w") as f:
        json.dump([{"text": s, "ids": tok.encode(s).ids} for s in STRINGS], f, ensure_ascii=False)
    print(name, "vocab", tok.get_vocab_size(), "files", sorted(os.listdir(d)))


def fp8_quantize(w):
    """DeepSeek's block rule: per 128 x 128 block, scale = amax / 448, q = e4m3fn(w / scale)."""
    rows, cols = w.shape
    sr, sc = (rows + 127) // 128, (cols + 127) // 128
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    scale = torch.empty(sr, sc, dtype=torch.float32)
    for i in range(sr):
        for j in range(sc):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128].float()
            s = blk.abs().max().clamp(min=1e-12) / 448.0
            scale[i, j] = s
            q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = (blk / s).to(torch.float8_e4m3fn)
    return q, scale


def build_fp8(out_dir):
    """DeepSeek V3 with FP8 projections (weight_scale_inv per 128 x 128 block), dims that leave partial blocks;
    the reference logits come from the dequantized weights (q * scale) in float32."""
    from safetensors.torch import save_file
    name = "deepseek_v3_fp8"
    build(name, out_dir, transformers.DeepseekV3Config, transformers.DeepseekV3ForCausalLM, torch.bfloat16, LLAMA3,
          {"hidden_size": 192, "intermediate_size": 256, "num_key_value_heads": 4, "moe_intermediate_size": 96,
           "n_shared_experts": 1, "n_routed_experts": 4, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
           "n_group": 2, "topk_group": 1, "q_lora_rank": 96, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
           "qk_rope_head_dim": 16, "v_head_dim": 32, "tie_word_embeddings": False, "routed_scaling_factor": 2.5},
          False, quantize=True)


def build_qwen3(out):
    """qwen3: per-head Q/K RMS norm before RoPE, head_dim 24 != hidden/heads (16), tied embeddings, BF16"""
    build("qwen3", out, transformers.Qwen3Config, transformers.Qwen3ForCausalLM, torch.bfloat16, QWEN2,
          {"tie_word_embeddings": True, "head_dim": 24}, False)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf"
    only = sys.argv[2:]  # family names to (re)build; none: all
    if only:
        for name in only:
            {"qwen3": build_qwen3}[name](out)
        return
    build_qwen3(out)
    build("llama", out, transformers.LlamaConfig, transformers.LlamaForCausalLM, torch.float32, LLAMA3,
          {"tie_word_embeddings": False}, True)
    build("qwen2", out, transformers.Qwen2Config, transformers.Qwen2ForCausalLM, torch.bfloat16, QWEN2,
          {"tie_word_embeddings": True}, False)
    build("mistral", out, transformers.MistralConfig, transformers.MistralForCausalLM, torch.float16, None,
          {"tie_word_embeddings": False, "sliding_window": None}, False)
    # DeepSeek V3: MLA with q LoRA, one dense layer then MoE (sigmoid routing with a score-correction bias,
    # 2 groups of 2 experts, top 1 group, 2 of 4 experts used, one shared expert); llama3 pre-tokenizer
    build("deepseek_v3", out, transformers.DeepseekV3Config, transformers.DeepseekV3ForCausalLM, torch.bfloat16,
          LLAMA3, {"num_key_value_heads": 4, "moe_intermediate_size": 32, "n_shared_experts": 1,
                   "n_routed_experts": 4, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "n_group": 2,
                   "topk_group": 1, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
                   "qk_rope_head_dim": 8, "v_head_dim": 16, "tie_word_embeddings": False,
                   "routed_scaling_factor": 2.5}, False)
    build_fp8(out)


if __name__ == "__main__":
    main()
