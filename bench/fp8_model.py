#!/usr/bin/env python3
"""bench/fp8_model.py - writes a random Hugging Face qwen3 directory of the
TinyLlama-1.1B shape (dim 2048, 22 layers, 32 heads, 4 KV heads, head 64,
ffn 5632) whose projections are FP8 e4m3 with 128 x 128 `weight_scale_inv`
block scales, quantized by DeepSeek's rule (scale = block amax / 448, codes
rounded to nearest), for `cinfer bench latency` on FP8 against the same
weights converted to BF16 / Q8_0 (bench/fp8_latency.sh).

qwen3 rather than llama: cinfer's llama family permutes Q/K rows, which it
does not do for FP8 weights; qwen3 has no such permutation, so every one of
the seven matrices of a layer is FP8. Embeddings and norms are BF16 / F32
(as in DeepSeek's FP8 checkpoints); the tokenizer (384 tokens) comes from
tests/data/hf/qwen3. Weights ~ N(0, 0.02), deterministic from --seed.
numpy only (no torch, no safetensors package: the format is a JSON header).

Usage: bench/fp8_model.py OUT_DIR [--layers N] [--seed S]
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

DIM, HEADS, KV_HEADS, HEAD_DIM, FFN = 2048, 32, 4, 64, 5632
E4M3_MAX = 448.0


def e4m3_magnitudes():
    """Values of codes 0..126 (127 is NaN), increasing with the code."""
    out = []
    for c in range(127):
        e, m = c >> 3, c & 7
        out.append((1 + m / 8) * 2.0 ** (e - 7) if e else m / 8 * 2.0**-6)
    return np.array(out, dtype=np.float64)


MAGS = e4m3_magnitudes()
MIDS = (MAGS[1:] + MAGS[:-1]) / 2  # rounding boundaries between neighbouring codes


def quantize_fp8(w):
    """w [out, in] f32 -> (codes uint8 [out, in], scale_inv f32 [ceil(out/128), ceil(in/128)])."""
    n, k = w.shape
    sr, sc = (n + 127) // 128, (k + 127) // 128
    scale = np.zeros((sr, sc), dtype=np.float32)
    codes = np.empty((n, k), dtype=np.uint8)
    for i in range(sr):
        for j in range(sc):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            s = max(float(np.abs(blk).max()) / E4M3_MAX, 1e-12)
            scale[i, j] = s
            v = np.abs(blk) / s
            mag = np.searchsorted(MIDS, v).astype(np.uint8)  # nearest code (ties go up)
            codes[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = mag | (np.signbit(blk).astype(np.uint8) << 7)
    return codes, scale


def bf16_bytes(w):
    u = w.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
    return u.astype(np.uint16).tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = os.path.join(root, "tests", "data", "hf", "qwen3")
    os.makedirs(a.out, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), os.path.join(a.out, f))
    vocab = json.load(open(os.path.join(src, "config.json")))["vocab_size"]
    rng = np.random.default_rng(a.seed)

    tensors = []  # (name, dtype, shape, bytes)

    def matrix(name, n, k):
        w = (rng.standard_normal((n, k), dtype=np.float32) * 0.02).astype(np.float32)
        codes, scale = quantize_fp8(w)
        tensors.append((name, "F8_E4M3", [n, k], codes.tobytes()))
        tensors.append((name + "_scale_inv", "F32", list(scale.shape), scale.tobytes()))

    def vector(name, n):
        v = 1 + rng.standard_normal(n, dtype=np.float32) * 0.02
        tensors.append((name, "F32", [n], v.astype(np.float32).tobytes()))

    emb = rng.standard_normal((vocab, DIM), dtype=np.float32) * 0.02
    tensors.append(("model.embed_tokens.weight", "BF16", [vocab, DIM], bf16_bytes(emb)))
    for L in range(a.layers):
        p = f"model.layers.{L}."
        matrix(p + "self_attn.q_proj.weight", HEADS * HEAD_DIM, DIM)
        matrix(p + "self_attn.k_proj.weight", KV_HEADS * HEAD_DIM, DIM)
        matrix(p + "self_attn.v_proj.weight", KV_HEADS * HEAD_DIM, DIM)
        matrix(p + "self_attn.o_proj.weight", DIM, HEADS * HEAD_DIM)
        matrix(p + "mlp.gate_proj.weight", FFN, DIM)
        matrix(p + "mlp.up_proj.weight", FFN, DIM)
        matrix(p + "mlp.down_proj.weight", DIM, FFN)
        vector(p + "self_attn.q_norm.weight", HEAD_DIM)
        vector(p + "self_attn.k_norm.weight", HEAD_DIM)
        vector(p + "input_layernorm.weight", DIM)
        vector(p + "post_attention_layernorm.weight", DIM)
        print(f"layer {L + 1}/{a.layers}", file=sys.stderr)
    vector("model.norm.weight", DIM)

    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for _, _, _, data in tensors:
            f.write(data)
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": DIM,
        "intermediate_size": FFN, "num_hidden_layers": a.layers, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "hidden_act": "silu",
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "vocab_size": vocab, "bos_token_id": 0, "eos_token_id": 2,
        "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]},
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


if __name__ == "__main__":
    main()
