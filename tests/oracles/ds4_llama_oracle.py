#!/usr/bin/env python3
"""ds4_llama_oracle.py - writes tests/data/deepseek4/<shape>.json: llama.cpp's
deepseek4 logits on tiny random models made by `cinfer mkmodel --arch
deepseek4` (the fixtures test_ds4_oracle.c compares cinfer against).

For every shape below: mkmodel writes the GGUF (F32 weights, so the
comparison is exact arithmetic up to float rounding), a prompt of random
token ids is decoded by llama.cpp in one batch with logits at every
position, then 64 tokens are greedy-decoded one at a time. The llama.cpp
side is tests/oracles/ds4_llama_logits.c, compiled here (outside the repo)
against /work/llama/build/bin/libllama.so (F32 KV cache, no flash
attention). Stored per shape: the mkmodel options, the prompt, per position
the argmax and the top-32 logits, all logits of the last position, the 64
greedy ids and each step's top-8.

Usage: tests/oracles/ds4_llama_oracle.py --cinfer build/cinfer
       [--llama /work/llama] [--out tests/data/deepseek4]
Needs: gcc, a built llama.cpp with deepseek4 (llama-cpp-python 0.3.36's
vendor/llama.cpp), /work/shared/models/stories260K.gguf (vocabulary)."""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

VOCAB = "/work/shared/models/stories260K.gguf"
N_GEN = 64

BASE = dict(dim=64, heads=4, ffn=64, head_dim=64, qk_rope=16, q_lora=32, o_groups=2, o_lora=32,
            index_heads=16, index_dim=64, experts=8, experts_used=2, expert_ffn=32,
            shared_experts=1, swiglu_limit=10.0, expert_scale=2.5, seed=11)

# name -> (mkmodel options beyond BASE, prompt length)
SHAPES = {
    # CSA / HCA / window-only mix, real 128-token window, top-k 8 < 75 rows,
    # one hash layer; prompt over two HCA groups
    "mix": (dict(layers=4, ratios="4,128,0,4", window=128, index_topk=8, hash_layers=1), 300),
    # small window (16) so most keys fall out of it; YaRN on compressed layers
    "window16_yarn": (dict(layers=3, ratios="0,4,128", window=16, index_topk=3, yarn_factor=4.0,
                           yarn_orig_ctx=64, compress_rope_base=40000.0, seed=12), 200),
    # mostly CSA, top-k 2, wider model (8 heads, 4 output groups), 5 Sinkhorn
    # iterations, an MTP block (loaded, unused here), two hash layers. (Every
    # shape has a ratio-4 and a ratio-128 layer: llama.cpp's deepseek4 dies
    # with SIGFPE when either compressor state has no layer.)
    "csa_topk2": (dict(layers=3, ratios="4,4,128", dim=128, heads=8, o_groups=4, window=32, index_topk=2,
                       sinkhorn=5, mtp_layers=1, hash_layers=2, seed=13), 160),
    # window-only layers first, no SwiGLU clamp (llama.cpp requires a shared expert)
    "window_heavy": (dict(layers=4, ratios="0,0,128,4", window=24, index_topk=4,
                          swiglu_limit=0.0, seed=14), 140),
}

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds4_llama_logits.c")


def mk_args(opts):
    out = ["--arch", "deepseek4"]
    for k, v in opts.items():
        if k in ("index_heads", "index_dim", "index_topk") and not v:
            continue
        if k == "shared_experts" or v or k == "swiglu_limit":
            if isinstance(v, float) and v == 0.0:
                continue
            out += ["--" + k.replace("_", "-"), str(v)]
    return out + ["--vocab-from", VOCAB, "--dtype", "f32"]


def build_helper(llama, tmp):
    src = os.path.join(llama, "llama_cpp_python-0.3.36", "vendor", "llama.cpp")
    lib = os.path.join(llama, "build", "bin")
    exe = os.path.join(tmp, "ds4_llama_logits")
    subprocess.run(["gcc", "-O2", "-o", exe, HELPER, "-I" + os.path.join(src, "include"),
                    "-I" + os.path.join(src, "ggml", "include"), "-L" + lib, "-lllama",
                    "-Wl,-rpath," + lib], check=True)
    return exe


def top(logits, k):
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))[:k]
    return [[i, logits[i]] for i in order]


def run_shape(name, cinfer, exe, tmp, out_dir):
    extra, n_prompt = SHAPES[name]
    opts = dict(BASE)
    opts.update(extra)
    gguf = os.path.join(tmp, name + ".gguf")
    subprocess.run([cinfer, "mkmodel"] + mk_args(opts) + [gguf], check=True, capture_output=True)
    rng = random.Random(1000 + opts["seed"])
    prompt = [rng.randrange(3, 512) for _ in range(n_prompt)]
    binp = os.path.join(tmp, name + ".bin")
    r = subprocess.run([exe, gguf, binp, str(N_GEN)] + [str(t) for t in prompt], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{name}: llama.cpp failed:\n{r.stderr[-3000:]}")
    with open(binp, "rb") as f:
        data = f.read()
    n_vocab, n_p, n_gen = struct.unpack_from("<3i", data, 0)
    off = 12
    rows = []
    for _ in range(n_p):
        rows.append(list(struct.unpack_from(f"<{n_vocab}f", data, off)))
        off += 4 * n_vocab
    greedy = list(struct.unpack_from(f"<{n_gen}i", data, off))
    off += 4 * n_gen
    steps = []
    for _ in range(n_gen):
        steps.append(list(struct.unpack_from(f"<{n_vocab}f", data, off)))
        off += 4 * n_vocab
    fixture = {
        "about": "llama.cpp (llama-cpp-python 0.3.36 vendor) deepseek4 on a cinfer mkmodel model; "
                 "written by tests/oracles/ds4_llama_oracle.py",
        "mkmodel": opts,
        "prompt": prompt,
        "positions": [{"argmax": top(rw, 1)[0][0], "top": top(rw, 32)} for rw in rows],
        "last_logits": rows[-1],
        "greedy": greedy,
        "greedy_steps": [{"top": top(s, 8)} for s in steps],
    }
    path = os.path.join(out_dir, name + ".json")
    with open(path, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
    print(f"{path}: {n_p} positions, {n_gen} greedy tokens")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cinfer", required=True)
    ap.add_argument("--llama", default="/work/llama")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                  "deepseek4"))
    ap.add_argument("shapes", nargs="*", default=list(SHAPES))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_helper(a.llama, tmp)
        for name in a.shapes:
            run_shape(name, a.cinfer, exe, tmp, a.out)


if __name__ == "__main__":
    main()
