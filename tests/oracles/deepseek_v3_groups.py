#!/usr/bin/env python3
"""deepseek_v3_groups.py - reference outputs for DeepSeek-V3 group-limited
routing (n_group / topk_group), which llama.cpp's fixture build lacks, from
Hugging Face transformers' DeepseekV3ForCausalLM.

What it does:
  1. `cinfer mkmodel --arch deepseek2` writes a small random F32 model with
     4 expert groups (2 used), sigmoid gating with exp_probs_b, normalized
     weights x 2.5, q_lora, a shared expert and YaRN rope scaling (factor 4),
     so the weights come from our deterministic generator (the unit test
     regenerates the identical file without torch);
  2. a small GGUF reader here loads those tensors into transformers'
     DeepseekV3 model (float64, eager attention);
  3. it saves, for a fixed prompt of 41 token ids, the top-8 logits and argmax
     at every position, all logits of the last position, and 32 greedy tokens
     (with each step's top-8) to tests/data/deepseek/v3_groups.json, which
     tests/unit/model/test_deepseek_oracle.c compares at 1e-4.

It needs torch and transformers: on first use it creates build/oracle-venv and
installs them there (torch from the CPU wheel index if reachable, else PyPI),
then re-runs itself inside that venv. Run from the repository root after
building: python3 tests/oracles/deepseek_v3_groups.py [--cinfer build/cinfer]
"""
import argparse
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.path.join(ROOT, "build", "oracle-venv")
VPY = os.path.join(VENV, "bin", "python")

# The model: keep in sync with tests/unit/model/test_deepseek_oracle.c.
MKMODEL = ["--arch", "deepseek2", "--dim", "128", "--layers", "3", "--heads", "4", "--ffn", "256",
           "--q-lora", "64", "--kv-lora", "64", "--qk-nope", "32", "--qk-rope", "16", "--v-head", "32",
           "--experts", "16", "--experts-used", "3", "--expert-ffn", "64", "--shared-experts", "1",
           "--dense-layers", "1", "--groups", "4", "--groups-used", "2", "--gating", "sigmoid",
           "--expert-scale", "2.5", "--yarn-factor", "4", "--yarn-orig-ctx", "512", "--ctx", "2048",
           "--dtype", "f32", "--seed", "42"]
VOCAB = "fixtures/vocab/derived-vocab-tiny-deepseek2.gguf"
N_GEN = 32


def ensure_venv():
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(VPY):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    probe = subprocess.run([VPY, "-c", "import torch, transformers, numpy"], capture_output=True)
    if probe.returncode != 0:
        pip = [VPY, "-m", "pip", "install", "-q"]
        if subprocess.run(pip + ["torch", "--index-url", "https://download.pytorch.org/whl/cpu"]).returncode != 0:
            subprocess.check_call(pip + ["torch"])
        subprocess.check_call(pip + ["transformers", "numpy"])
    os.execv(VPY, [VPY] + sys.argv)


# ---- a minimal GGUF reader (F32 tensors; keys of scalar, string and array type) ----

def read_gguf(path):
    import numpy as np
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t in scalar:
            return take(scalar[t])
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        raise ValueError("bad gguf value type %d" % t)

    assert data[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        ne = [take("Q") for _ in range(nd)]
        ty, off = take("I"), take("Q")
        infos.append((name, ne, ty, off))
    align = kv.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, ty, off in infos:
        assert ty == 0, "%s: only F32 tensors are read" % name
        count = 1
        for n in ne:
            count *= n
        arr = np.frombuffer(data, dtype=np.float32, count=count, offset=base + off)
        tensors[name] = arr.reshape(list(reversed(ne))).copy()
    return kv, tensors


def build_model(kv, t):
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    a = lambda k: kv["deepseek2." + k]
    n_layer = a("block_count")
    rope = a("rope.dimension_count")
    cfg = DeepseekV3Config(
        vocab_size=t["token_embd.weight"].shape[0], hidden_size=a("embedding_length"),
        intermediate_size=a("feed_forward_length"), moe_intermediate_size=a("expert_feed_forward_length"),
        num_hidden_layers=n_layer, num_attention_heads=a("attention.head_count"),
        num_key_value_heads=a("attention.head_count"), n_shared_experts=a("expert_shared_count"),
        n_routed_experts=a("expert_count"), routed_scaling_factor=a("expert_weights_scale"),
        kv_lora_rank=a("attention.kv_lora_rank"), q_lora_rank=a("attention.q_lora_rank"),
        qk_rope_head_dim=rope, v_head_dim=a("attention.value_length"),
        qk_nope_head_dim=a("attention.key_length") - rope, n_group=a("expert_group_count"),
        topk_group=a("expert_group_used_count"), num_experts_per_tok=a("expert_used_count"),
        first_k_dense_replace=a("leading_dense_block_count"), norm_topk_prob=a("expert_weights_norm"),
        rms_norm_eps=a("attention.layer_norm_rms_epsilon"), max_position_embeddings=a("context_length"),
        tie_word_embeddings=False, attention_bias=False, rope_interleave=True,
        rope_parameters={"rope_type": "yarn", "rope_theta": a("rope.freq_base"),
                         "factor": a("rope.scaling.factor"),
                         "original_max_position_embeddings": a("rope.scaling.original_context_length"),
                         "beta_fast": 32.0, "beta_slow": 1.0,
                         "mscale": a("rope.scaling.yarn_log_multiplier") / 0.1,
                         "mscale_all_dim": a("rope.scaling.yarn_log_multiplier") / 0.1},
    )
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"
    model = DeepseekV3ForCausalLM(cfg).eval()
    sd = {"model.embed_tokens.weight": t["token_embd.weight"], "lm_head.weight": t["output.weight"],
          "model.norm.weight": t["output_norm.weight"]}
    import numpy as np
    for i in range(n_layer):
        p, g = "model.layers.%d." % i, "blk.%d." % i
        sd[p + "input_layernorm.weight"] = t[g + "attn_norm.weight"]
        sd[p + "post_attention_layernorm.weight"] = t[g + "ffn_norm.weight"]
        sd[p + "self_attn.q_a_proj.weight"] = t[g + "attn_q_a.weight"]
        sd[p + "self_attn.q_a_layernorm.weight"] = t[g + "attn_q_a_norm.weight"]
        sd[p + "self_attn.q_b_proj.weight"] = t[g + "attn_q_b.weight"]
        sd[p + "self_attn.kv_a_proj_with_mqa.weight"] = t[g + "attn_kv_a_mqa.weight"]
        sd[p + "self_attn.kv_a_layernorm.weight"] = t[g + "attn_kv_a_norm.weight"]
        sd[p + "self_attn.kv_b_proj.weight"] = t[g + "attn_kv_b.weight"]
        sd[p + "self_attn.o_proj.weight"] = t[g + "attn_output.weight"]
        if g + "ffn_gate.weight" in t:
            for n in ("gate", "up", "down"):
                sd[p + "mlp.%s_proj.weight" % n] = t[g + "ffn_%s.weight" % n]
            continue
        sd[p + "mlp.gate.weight"] = t[g + "ffn_gate_inp.weight"]
        sd[p + "mlp.gate.e_score_correction_bias"] = t[g + "exp_probs_b.bias"]
        sd[p + "mlp.experts.gate_up_proj"] = np.concatenate(
            [t[g + "ffn_gate_exps.weight"], t[g + "ffn_up_exps.weight"]], axis=1)
        sd[p + "mlp.experts.down_proj"] = t[g + "ffn_down_exps.weight"]
        for n in ("gate", "up", "down"):
            sd[p + "mlp.shared_experts.%s_proj.weight" % n] = t[g + "ffn_%s_shexp.weight" % n]
    own = model.state_dict()
    missing = sorted(set(own) - set(sd))
    extra = sorted(set(sd) - set(own))
    assert not missing and not extra, "state dict mismatch: missing %s, unexpected %s" % (missing, extra)
    for k, v in sd.items():
        assert tuple(own[k].shape) == v.shape, "%s: %s vs %s" % (k, tuple(own[k].shape), v.shape)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)
    return model.double()


def top8(row):
    import numpy as np
    idx = sorted(range(len(row)), key=lambda i: (-row[i], i))[:8]
    return [[int(i), float("%.9g" % row[i])] for i in idx]


def main():
    ensure_venv()
    import numpy as np
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--cinfer", default=os.path.join(ROOT, "build", "cinfer"))
    ap.add_argument("--shared", default=os.environ.get("CINFER_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "deepseek", "v3_groups.json"))
    args = ap.parse_args()
    gguf = os.path.join(ROOT, "build", "oracle-v3-groups.gguf")
    subprocess.check_call([args.cinfer, "mkmodel"] + MKMODEL +
                          ["--vocab-from", os.path.join(args.shared, VOCAB), gguf])
    kv, t = read_gguf(gguf)
    model = build_model(kv, t)
    bos = kv["tokenizer.ggml.bos_token_id"]
    prompt = [bos] + [int(x) for x in np.random.default_rng(7).integers(0, bos, 40)]
    torch.set_grad_enabled(False)
    logits = model(torch.tensor([prompt])).logits[0].numpy()
    positions = [{"pos": i, "argmax": int(np.argmax(logits[i])), "top": top8(logits[i])}
                 for i in range(len(prompt))]
    ids, steps, gaps = list(prompt), [], []
    last = logits[-1]
    for s in range(N_GEN):
        row = last if s == 0 else model(torch.tensor([ids])).logits[0, -1].numpy()
        srt = np.sort(row)
        gaps.append(float(srt[-1] - srt[-2]))
        nxt = int(np.argmax(row))
        steps.append({"pos": len(ids), "token": nxt, "top": top8(row)})
        ids.append(nxt)
    out = {
        "format": "cinfer-oracle-v1",
        "oracle": "transformers %s DeepseekV3ForCausalLM (float64, eager), torch %s" % (
            __import__("transformers").__version__, torch.__version__),
        "mkmodel": MKMODEL + ["--vocab-from", "<shared>/" + VOCAB],
        "input_ids": prompt,
        "positions": positions,
        "last_logits": [float("%.9g" % v) for v in last],
        "greedy_ids": ids[len(prompt):],
        "greedy_steps": steps,
        "min_greedy_top2_gap": min(gaps),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (min greedy top-2 gap %.3g)" % (args.out, min(gaps)))


if __name__ == "__main__":
    main()
