#!/usr/bin/env python3
"""ds4_hf_oracle.py - the second, independent deepseek4 reference: Hugging Face
transformers' DeepseekV4ForCausalLM (F32, eager attention) on the same random
weights as the llama.cpp fixtures (tests/data/deepseek4/<shape>.json, which
hold the mkmodel options and the prompt). For each shape: mkmodel writes the
GGUF, its tensors are loaded into the transformers model under their
transformers names (the inverse of llama.cpp's converter), the prompt runs in
one forward pass, and its per-position logits are compared with the llama.cpp
fixture's (top-32 per position, all of the last position; cinfer matches
those to 1e-4, test_ds4_oracle.c); then 64 greedy tokens from transformers'
generate() (its own compressor caches) against the fixture's greedy ids.
Writes tests/data/deepseek4/hf_vs_llama.json (max |diff| and argmax
agreement per shape) and prints it.

Usage (torch + transformers >= 5.8 in a separate venv, e.g. /work/venvs/hf):
  /work/venvs/hf/bin/python tests/oracles/ds4_hf_oracle.py --cinfer build/cinfer [shape...]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "deepseek4")
sys.path.insert(0, HERE)
import ds4_llama_oracle as llama_oracle  # noqa: E402  (mk_args, SHAPES)

GGUF_PY = "/work/llama/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py"

LAYER_MAP = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_sinks.weight": "self_attn.sinks",
    "attn_q_a.weight": "self_attn.q_a_proj.weight",
    "attn_q_a_norm.weight": "self_attn.q_a_norm.weight",
    "attn_q_b.weight": "self_attn.q_b_proj.weight",
    "attn_kv.weight": "self_attn.kv_proj.weight",
    "attn_kv_a_norm.weight": "self_attn.kv_norm.weight",
    "attn_output_a.weight": "self_attn.o_a_proj.weight",
    "attn_output_b.weight": "self_attn.o_b_proj.weight",
    "hc_attn_fn.weight": "attn_hc.fn",
    "hc_attn_base.weight": "attn_hc.base",
    "hc_attn_scale.weight": "attn_hc.scale",
    "hc_ffn_fn.weight": "ffn_hc.fn",
    "hc_ffn_base.weight": "ffn_hc.base",
    "hc_ffn_scale.weight": "ffn_hc.scale",
    "attn_compressor_kv.weight": "self_attn.compressor.kv_proj.weight",
    "attn_compressor_gate.weight": "self_attn.compressor.gate_proj.weight",
    "attn_compressor_ape.weight": "self_attn.compressor.position_bias",
    "attn_compressor_norm.weight": "self_attn.compressor.kv_norm.weight",
    "indexer.proj.weight": "self_attn.compressor.indexer.scorer.weights_proj.weight",
    "indexer.attn_q_b.weight": "self_attn.compressor.indexer.q_b_proj.weight",
    "indexer_compressor_kv.weight": "self_attn.compressor.indexer.kv_proj.weight",
    "indexer_compressor_gate.weight": "self_attn.compressor.indexer.gate_proj.weight",
    "indexer_compressor_ape.weight": "self_attn.compressor.indexer.position_bias",
    "indexer_compressor_norm.weight": "self_attn.compressor.indexer.kv_norm.weight",
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
    "ffn_gate_tid2eid.weight": "mlp.gate.tid2eid",
    "ffn_down_exps.weight": "mlp.experts.down_proj",
    "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight",
}
ROOT_MAP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "output_hc_fn.weight": "model.hc_head.hc_fn",
    "output_hc_base.weight": "model.hc_head.hc_base",
    "output_hc_scale.weight": "model.hc_head.hc_scale",
}


def hf_config(o, literal_zero_clamp=False):
    """literal_zero_clamp: pass swiglu_limit 0 as is. transformers then clamps
    gate <= 0 and up to [0, 0] (its _apply_gate has no `limit > 0` test),
    while the reference (Expert: `if self.swiglu_limit > 0`) and llama.cpp
    (limit > eps) read 0 as "no clamp"; by default 0 becomes 1e30."""
    from transformers import DeepseekV4Config
    ratios = [int(r) for r in o["ratios"].split(",")][: o["layers"]]
    kw = dict(vocab_size=512, hidden_size=o["dim"], moe_intermediate_size=o["expert_ffn"],
              num_hidden_layers=o["layers"], num_attention_heads=o["heads"], head_dim=o["head_dim"],
              q_lora_rank=o["q_lora"], qk_rope_head_dim=o["qk_rope"], num_experts_per_tok=o["experts_used"],
              n_routed_experts=o["experts"], n_shared_experts=1, routed_scaling_factor=o["expert_scale"],
              compress_ratios=ratios, num_hash_layers=o.get("hash_layers", 0),
              swiglu_limit=o["swiglu_limit"] if o["swiglu_limit"] > 0 or literal_zero_clamp else 1e30,
              sliding_window=o["window"], o_groups=o["o_groups"], o_lora_rank=o["o_lora"],
              index_n_heads=o["index_heads"], index_head_dim=o["index_dim"], index_topk=o["index_topk"],
              hc_sinkhorn_iters=o.get("sinkhorn", 20), rope_theta=10000.0,
              compress_rope_theta=o.get("compress_rope_base", 160000.0), num_nextn_predict_layers=0,
              rms_norm_eps=1e-6, hc_eps=1e-6, max_position_embeddings=2048, tie_word_embeddings=False)
    if o.get("yarn_factor"):
        kw["rope_parameters"] = {"rope_type": "yarn", "factor": o["yarn_factor"],
                                 "original_max_position_embeddings": o["yarn_orig_ctx"],
                                 "beta_fast": 32.0, "beta_slow": 1.0}
    return DeepseekV4Config(**kw)


def load_weights(model, gguf_path, o):
    sys.path.insert(0, GGUF_PY)
    from gguf import GGUFReader
    sd = model.state_dict()
    done = set()
    for t in GGUFReader(gguf_path).tensors:
        name = t.name
        arr = np.array(t.data)
        if name in ROOT_MAP:
            key = ROOT_MAP[name]
        else:
            _, layer, part = name.split(".", 2)
            if int(layer) >= o["layers"]:
                continue  # MTP blocks: not part of the transformers forward
            pre = f"model.layers.{layer}."
            if part in ("ffn_gate_exps.weight", "ffn_up_exps.weight"):
                key = pre + "mlp.experts.gate_up_proj"
                fe = o["expert_ffn"]
                half = slice(0, fe) if part.startswith("ffn_gate") else slice(fe, 2 * fe)
                sd[key][:, half, :] = torch.from_numpy(arr.astype(np.float32))
                done.add(key + part)
                continue
            key = pre + LAYER_MAP[part]
        want = sd[key]
        src = torch.from_numpy(arr.astype(np.int64 if want.dtype == torch.int64 else np.float32))
        if tuple(src.shape) != tuple(want.shape):
            src = src.reshape(want.shape)
        want.copy_(src)
        done.add(key)
    model.load_state_dict(sd)
    missing = [k for k in sd if k not in done and "inv_freq" not in k and "gate_up_proj" not in k
               and "e_score_correction_bias" not in k]
    if missing:
        sys.exit(f"weights not loaded: {missing[:8]}")


def run_shape(name, cinfer, tmp, literal_zero_clamp=False):
    from transformers import DeepseekV4ForCausalLM
    with open(os.path.join(DATA, name + ".json")) as f:
        fx = json.load(f)
    o = fx["mkmodel"]
    gguf = os.path.join(tmp, name + ".gguf")
    subprocess.run([cinfer, "mkmodel"] + llama_oracle.mk_args(o) + [gguf], check=True, capture_output=True)
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(hf_config(o, literal_zero_clamp)).float().eval()
    model.config._attn_implementation = "eager"
    load_weights(model, gguf, o)
    ids = torch.tensor([fx["prompt"]])
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0].double().numpy()
    worst, argmax_same = 0.0, 0
    for p, pos in enumerate(fx["positions"]):
        for tok, val in pos["top"]:
            worst = max(worst, abs(logits[p, tok] - val))
        argmax_same += int(np.argmax(logits[p]) == pos["argmax"])
    last = np.array(fx["last_logits"])
    worst_last = float(np.max(np.abs(logits[-1] - last)))
    with torch.no_grad():
        gen = model.generate(input_ids=ids, max_new_tokens=len(fx["greedy"]), do_sample=False)[0, ids.shape[1]:]
    greedy_same = int(sum(int(a == b) for a, b in zip(gen.tolist(), fx["greedy"])))
    return {"positions": len(fx["positions"]), "argmax_same": argmax_same, "max_top32_diff": float(worst),
            "max_last_diff": float(worst_last), "greedy_same": greedy_same, "greedy": len(fx["greedy"])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cinfer", required=True)
    ap.add_argument("shapes", nargs="*", default=list(llama_oracle.SHAPES))
    a = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.shapes:
            out[name] = run_shape(name, a.cinfer, tmp)
            print(name, out[name], flush=True)
            if llama_oracle.SHAPES[name][0].get("swiglu_limit", 1) == 0:
                key = name + " (swiglu_limit 0 passed to transformers as is)"
                out[key] = run_shape(name, a.cinfer, tmp, literal_zero_clamp=True)
                print(key, out[key], flush=True)
    with open(os.path.join(DATA, "hf_vs_llama.json"), "w") as f:
        json.dump({"about": "transformers DeepseekV4ForCausalLM (F32, eager) vs the llama.cpp fixtures; "
                            "written by tests/oracles/ds4_hf_oracle.py", "shapes": out}, f, indent=1)


if __name__ == "__main__":
    main()
