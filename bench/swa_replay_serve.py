"""swa_replay_serve.py - issue 16 compute-saved benchmark (run by bench/swa_replay_serve.sh).

For each workload (the agent workload and the Mooncake conversation trace, both replayed through
`cinfer bench serve --api completions`) and each server configuration, starts `cinfer serve` on a
window model, runs the workload, and reports total prefill FLOPs and TTFT. Sessions' window state
expires between turns: the window-state TTL (--swa-state-ttl) is far shorter than the think time
/ the trace's gaps, while the long-lived blocks (full-attention KV) stay in the KV pool (same
--kv-memory for every configuration: equal cache capacity).

Configurations:
  no-cache      --swa-state-memory 0 --swa-replay off: no window state at all; exact mode then
                recomputes every prompt from its start (nothing is reused)
  exact         --swa-replay off, TTL short: a hit without a live snapshot recomputes exactly
                from the last snapshot (or the start)
  replay        --swa-replay on, TTL short: bounded replay of the last W tokens
  exact-kept    --swa-replay off, TTL 600 s: the snapshots outlive the think time (upper bound)

Prefill FLOPs are counted from each response's usage (prompt = cached + replayed + computed) and
the model's shapes (read from the GGUF): per computed or replayed position p, 2 x the block
matmul weights, plus attention 2 x n_head x (k_len + v_len) x keys, with keys = p + 1 for a full
layer and min(p - floor + 1, W) for a window layer (floor = the replay start after a bounded
replay, else 0); plus the output head once per request. Window layers are gemma2's even layers
(llama.cpp's convention for gemma2)."""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_shapes(path):
    """The metadata scalars and every tensor's shape of a GGUF file (documented format, v2/v3)."""
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def rstr():
            return f.read(rd("<Q")).decode("utf-8", "replace")

        def rval(t):
            if t in GGUF_SCALARS:
                return rd(GGUF_SCALARS[t])
            if t == 8:
                return rstr()
            if t == 9:
                et, n = rd("<I"), rd("<Q")
                return [rval(et) for _ in range(n)]
            raise ValueError("GGUF value type %d" % t)

        if f.read(4) != b"GGUF":
            raise ValueError("%s: not a GGUF file" % path)
        rd("<I")
        n_tensors, n_kv = rd("<Q"), rd("<Q")
        meta = {}
        for _ in range(n_kv):
            k = rstr()
            meta[k] = rval(rd("<I"))
        shapes = {}
        for _ in range(n_tensors):
            name = rstr()
            dims = [rd("<Q") for _ in range(rd("<I"))]
            rd("<I"), rd("<Q")
            shapes[name] = dims
    return meta, shapes


class FlopModel:
    def __init__(self, path):
        meta, shapes = read_gguf_shapes(path)
        arch = meta["general.architecture"]
        g = lambda k: meta["%s.%s" % (arch, k)]
        self.n_layer = g("block_count")
        self.n_head = g("attention.head_count")
        kl = meta.get("%s.attention.key_length" % arch, g("embedding_length") // self.n_head)
        vl = meta.get("%s.attention.value_length" % arch, kl)
        self.attn_per_key = 2 * self.n_head * (kl + vl)
        self.window = meta.get("%s.attention.sliding_window" % arch, 0)
        self.window_layers = sum(1 for i in range(self.n_layer) if self.window and i % 2 == 0)
        self.full_layers = self.n_layer - self.window_layers
        self.matmul = 2 * sum(d[0] * d[1] for n, d in shapes.items() if n.startswith("blk.") and len(d) == 2)
        head = shapes.get("output.weight") or shapes["token_embd.weight"]
        self.head = 2 * head[0] * head[1]

    def request(self, prompt, cached, replayed):
        floor = cached if replayed > 0 else 0
        total = self.head
        for p in range(cached, prompt):
            wkeys = min(p - floor + 1, self.window) if self.window else 0
            total += self.matmul + self.attn_per_key * (self.full_layers * (p + 1) + self.window_layers * wkeys)
        return total


class Server:
    def __init__(self, bin_, model, args, threads):
        cmd = [bin_, "serve", model, "--port", "0", "--ctx", "2048", "-t", str(threads)] + args
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.port = None
        ev = threading.Event()

        def reader():
            for line in self.proc.stderr:
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ev.set()
        threading.Thread(target=reader, daemon=True).start()
        if not ev.wait(120):
            self.proc.kill()
            raise RuntimeError("cinfer serve did not start: %s" % " ".join(cmd))
        self.url = "http://127.0.0.1:%d" % self.port

    def metric(self, name):
        text = urllib.request.urlopen(self.url + "/metrics", timeout=30).read().decode()
        m = re.search(r"^%s\{[^}]*\} ([0-9.e+]+)" % name, text, re.M)
        return float(m.group(1)) if m else 0.0

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


CONFIGS = [
    ("no-cache", ["--swa-state-memory", "0", "--swa-replay", "off"]),
    ("exact", ["--swa-replay", "off", "--swa-state-ttl", "0.05"]),
    ("replay", ["--swa-replay", "on", "--swa-state-ttl", "0.05"]),
    ("exact-kept", ["--swa-replay", "off", "--swa-state-ttl", "600"]),
]


def conversations(trace, n, out):
    """Writes to out the first multi-turn conversations of a Mooncake trace (lines 0..4000; a line
    continues an earlier one when that line's hash ids, two or more, are a prefix of its own), whole
    conversations until at least n lines, in trace order with their timestamps. The trace's head has
    almost no reuse (4% of hash blocks in its first 40 lines); its conversations are where sessions
    return, which is what this benchmark is about."""
    lines = []
    with open(trace) as f:
        for i, line in enumerate(f):
            if i >= 4000:
                break
            lines.append(line)
    recs = [json.loads(x) for x in lines]
    first, parent = {}, []
    for j, r in enumerate(recs):
        h = tuple(r["hash_ids"])
        parent.append(next((first[h[:k]] for k in range(len(h) - 1, 1, -1) if h[:k] in first), None))
        for k in range(2, len(h) + 1):
            first.setdefault(h[:k], j)
    chains = {}
    for j, p in enumerate(parent):
        if p is not None:
            while parent[p] is not None:
                p = parent[p]
            chains.setdefault(p, [p]).append(j)
    keep = set()
    for root in sorted(chains):
        keep.update(chains[root])
        if len(keep) >= n:
            break
    with open(out, "w") as f:
        for j in sorted(keep):
            f.write(lines[j])
    return len(keep)


def workloads(trace):
    common = ["--api", "completions", "--ignore-eos", "--temperature", "0", "--no-progress"]
    return [
        ("agent", common + ["--workload", "agent", "--sessions", "3", "--turns", "5", "--system-len", "200",
                            "--tool-len", "80", "--user-len", "24", "--output-len", "12", "--think-time", "1.0"]),
        ("mooncake", common + ["--workload", "trace", trace, "--block-scale", os.environ.get("MOONCAKE_BLOCK_SCALE", "8"),
                               "--time-scale", "50", "--max-output-len", "12"]),
    ]


def run(bin_, model, trace, threads):
    fm = FlopModel(model)
    print("model %s: %d layers (%d window, W=%d; %d full), %.2f MFLOP/token in block matmuls"
          % (os.path.basename(model), fm.n_layer, fm.window_layers, fm.window, fm.full_layers, fm.matmul / 1e6))
    rows = []
    tmp = tempfile.mkdtemp(prefix="cinfer-swa-bench-")
    sub = os.path.join(tmp, "conversations.jsonl")
    n = conversations(trace, int(os.environ.get("MOONCAKE_REQUESTS", "24")), sub)
    print("Mooncake: %d lines of whole conversations from the head of %s" % (n, os.path.basename(trace)))
    only = os.environ.get("SWA_BENCH_ONLY")
    for wname, wargs in workloads(sub):
        if only and wname != only:
            continue
        for cname, cargs in CONFIGS:
            srv = Server(bin_, model, cargs, threads)
            out = os.path.join(tmp, "%s-%s.json" % (wname, cname))
            try:
                cmd = [bin_, "bench", "serve", "--base-url", srv.url, "--out", out] + wargs
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                replays = srv.metric("cinfer_swa_replays_total")
                hits = srv.metric("cinfer_swa_state_hits_total")
            finally:
                srv.stop()
            res = json.load(open(out))
            s, reqs = res["summary"], res["requests"]
            ok = [r for r in reqs if r["usage"] and r["error"] == "ok"]
            flops = sum(fm.request(r["prompt_tokens"], r["cached_tokens"], r.get("replayed_tokens", 0)) for r in ok)
            rows.append(dict(workload=wname, config=cname, requests=s["requests_ok"], input=s["input_tokens"],
                             cached=s["cached_tokens"], replayed=s.get("replayed_tokens", 0),
                             computed=s["computed_tokens"], flops=flops, ttft_mean=s["ttft_ms"]["mean"],
                             ttft_p50=s["ttft_ms"]["p50"], ttft_p90=s["ttft_ms"]["p90"], replays=replays,
                             state_hits=hits))
            print("  %-9s %-10s done: %d requests" % (wname, cname, s["requests_ok"]), file=sys.stderr)
    print()
    print("%-9s %-10s %5s %7s %7s %8s %8s %10s %7s %9s %9s %9s %8s %6s" % (
        "workload", "config", "reqs", "input", "cached", "replayed", "computed", "prefill", "vs", "TTFT mean",
        "TTFT p50", "TTFT p90", "replays", "snap"))
    print("%-9s %-10s %5s %7s %7s %8s %8s %10s %7s %9s %9s %9s %8s %6s" % (
        "", "", "", "tokens", "", "", "", "GFLOP", "exact", "ms", "ms", "ms", "", "hits"))
    for r in rows:
        exact = next(x for x in rows if x["workload"] == r["workload"] and x["config"] == "exact")
        print("%-9s %-10s %5d %7d %7d %8d %8d %10.3f %6.3fx %9.1f %9.1f %9.1f %8d %6d" % (
            r["workload"], r["config"], r["requests"], r["input"], r["cached"], r["replayed"], r["computed"],
            r["flops"] / 1e9, r["flops"] / exact["flops"], r["ttft_mean"], r["ttft_p50"], r["ttft_p90"],
            r["replays"], r["state_hits"]))
    for w in sorted(set(r["workload"] for r in rows)):
        g = {r["config"]: r for r in rows if r["workload"] == w}
        print("%s: bounded replay does %.1f%% of exact recompute's prefill work (%.1f%% of no cache); TTFT mean "
              "%.2fx of exact" % (w, 100 * g["replay"]["flops"] / g["exact"]["flops"],
                                   100 * g["replay"]["flops"] / g["no-cache"]["flops"],
                                   g["replay"]["ttft_mean"] / g["exact"]["ttft_mean"]))
    for f in os.listdir(tmp):  # results and the trace subset
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
