"""store_util.py - shared helpers for the persistent KV store end-to-end tests
(tests/clients/test_store_*.py, run by tests/integration/store_*.sh): prompts as
token ids, completions through the openai SDK (streamed, so TTFT is measured),
waiting for write-back, reading object headers (docs/store.md "Object format")
to find the object of a prompt's j-th block, and the `cinfer store` CLI."""
import os
import random
import struct
import subprocess
import time

import openai

from cinfer_server import BIN, MODEL_NAME, SHARED

BLOCK = 16  # the engine's block_tokens (docs/engine.md)
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")


def prompt_ids(seed, n):
    """n token ids of the stories vocabulary (no BOS/EOS/UNK), deterministic from seed."""
    r = random.Random(seed)
    return [r.randrange(3, 500) for _ in range(n)]


def complete(srv, ids, max_tokens=8, model=MODEL_NAME, headers=None, extra=None, api_key="x"):
    """Greedy streamed completion of exactly max_tokens tokens (ignore_eos, so the number of
    blocks written back is known). Returns dict(text, cached, prompt_tokens, ttft, total)."""
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key=api_key, max_retries=0, timeout=120)
    t0 = time.time()
    stream = client.completions.create(model=model, prompt=ids, max_tokens=max_tokens, temperature=0, stream=True,
                                       stream_options={"include_usage": True}, extra_headers=headers,
                                       extra_body=dict(extra or {}, ignore_eos=True))
    text, ttft, usage = "", None, None
    for ch in stream:
        if ch.choices:
            if ttft is None:
                ttft = time.time() - t0
            text += ch.choices[0].text or ""
        if ch.usage:
            usage = ch.usage
    details = usage.prompt_tokens_details
    return {"text": text, "cached": details.cached_tokens if details else 0, "prompt_tokens": usage.prompt_tokens,
            "ttft": ttft, "total": time.time() - t0}


def blocks(n_prompt, max_tokens):
    """Full blocks a greedy request writes back: every computed position (the prompt and all
    outputs but the last, which is never fed back) in full blocks. Waiting for fewer can leave
    a block of the chain still being written by the other I/O thread."""
    return (n_prompt + max_tokens - 1) // BLOCK


def wait_written(srv, n, timeout=30):
    """Waits until the server has published (or found already published) at least n objects."""
    deadline = time.time() + timeout
    while True:
        m = srv.metrics()
        w = m["cinfer_kv_store_objects_written_total"] + m["cinfer_kv_store_writes_skipped_total"]
        if w >= n or time.time() > deadline:
            return w
        time.sleep(0.05)


def objects(store):
    """Every published object: list of dict(path, key, parent, tokens, cls, created, expires)."""
    out = []
    for root, _, files in os.walk(os.path.join(store, "objects")):
        for f in files:
            if ".tmp." in f:
                continue
            p = os.path.join(root, f)
            try:  # O_NOATIME: atime is the store's LRU order (mtime = expiry, so relatime would move it)
                with os.fdopen(os.open(p, os.O_RDONLY | os.O_NOATIME), "rb") as fh:
                    h = fh.read(160)
                    if len(h) < 160 or h[:8] != b"CINFKVB\0":
                        continue
                    n = struct.unpack_from("<I", h, 112)[0]
                    toks = list(struct.unpack("<%di" % n, fh.read(4 * n)))
            except OSError:
                continue
            cls, created, expires = struct.unpack_from("<Iqq", h, 116)
            out.append({"path": p, "key": h[48:80], "parent": h[80:112], "tokens": toks, "cls": cls,
                        "created": created, "expires": expires})
    return out


def chain(store, ids):
    """Paths of the objects holding the prompt's full blocks, in order (stops at the first missing one)."""
    objs = objects(store)
    for seq in (ids, [1] + ids):  # with or without a BOS the engine may add
        parent, paths = b"\0" * 32, []
        for j in range(len(seq) // BLOCK):
            want = seq[j * BLOCK:(j + 1) * BLOCK]
            hit = [o for o in objs if o["parent"] == parent and o["tokens"] == want]
            if not hit:
                break
            paths.append(hit[0]["path"])
            parent = hit[0]["key"]
        if paths:
            return paths
    return []


def wait_chains(store, prompts, timeout=30):
    """Waits until every prompt's full blocks are all published (blocks loaded from the store
    are not written again, so the server's counters cannot tell)."""
    deadline = time.time() + timeout
    while True:
        n = [len(chain(store, p)) for p in prompts]
        if all(k >= len(p) // BLOCK for k, p in zip(n, prompts)) or time.time() > deadline:
            return n
        time.sleep(0.05)


def cli(*args, env=None):
    """Runs `cinfer ARGS`; returns (rc, stdout + stderr)."""
    p = subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **env) if env else None)
    return p.returncode, p.stdout + p.stderr


def mkmodel(path, ctx=4096, dim=256, layers=4, heads=4, kv_heads=2, ffn=768):
    """A small random llama with the stories vocabulary and a long context (written at test time)."""
    rc, out = cli("mkmodel", "--arch", "llama", "--dim", str(dim), "--layers", str(layers), "--heads", str(heads),
                  "--kv-heads", str(kv_heads), "--ffn", str(ffn), "--vocab-from", STORIES, "--dtype", "f32",
                  "--seed", "8", "--ctx", str(ctx), path)
    if rc != 0:
        raise RuntimeError("mkmodel failed: " + out)
    return path
