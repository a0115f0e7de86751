"""swa_replay_serve.py - issue 16 compute-saved benchmark (run by bench/swa_replay_serve.sh).

For each workload and each server configuration, starts `cinfer serve` on a window model (gemma2,
deepseek4), runs the workload, and reports total prefill FLOPs, TTFT and the server's CPU seconds.
Workloads:
  agent     `cinfer bench serve --workload agent` (3 sessions, 1 s think time; shapes: --agent-shape)
  mooncake  conversations of the Mooncake trace replayed in closed loop: a
            fixed number of sessions at once, each turn sent after the previous one completed plus
            the trace's think time (`cinfer bench serve --workload conversations`), so every
            configuration sends exactly the same requests; the
            run fails (exit 1, "NOT COMPARABLE") when a configuration did not complete all of them
Sessions' window state expires between turns: the window-state TTL (--swa-state-ttl 0.05) is
shorter than every think time, while the long-lived blocks (full-attention KV, deepseek4's
compressed rows) stay in the KV pool (the same --kv-memory for every configuration: equal cache
capacity).

Configurations:
  no-cache      --swa-state-memory 0 --swa-replay off: no window state at all; exact mode then
                recomputes every prompt from its start (nothing is reused)
  exact         --swa-replay off, TTL short: a hit without a live snapshot recomputes exactly
                from the last snapshot (or the start)
  replay        --swa-replay on, TTL short: bounded replay of the last W tokens
  exact-kept    --swa-replay off, TTL 600 s: the snapshots outlive the think time (upper bound)

Prefill FLOPs are counted from each response's usage (prompt = cached + replayed + computed) and
the model's shapes read from the GGUF (FlopModel). Server CPU seconds (/proc) are the measured
counterpart; they include decode and HTTP work."""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
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
    """Prefill FLOPs of one request from its usage and the model's shapes. Per computed or replayed
    position p: 2 x the block matmul weights (MoE experts: x used / count), plus attention
    2 x n_head x (k_len + v_len) per key. Keys per layer kind: full p + 1; window
    min(p - floor + 1, W) (floor = the replay start after a bounded replay, else 0); deepseek4
    compressed layers add their compressed rows ((p + 1) // ratio; ratio 4 attends to at most the
    indexer's top-k rows and scores every row with the indexer, 2 x index heads x index dim each).
    Plus the output head once per request. gemma2's window layers are the even ones (llama.cpp's
    convention)."""

    def __init__(self, path):
        meta, shapes = read_gguf_shapes(path)
        arch = meta["general.architecture"]
        self.arch = arch
        g = lambda k, d=None: meta.get("%s.%s" % (arch, k), d)
        self.n_layer = g("block_count")
        n_head = g("attention.head_count")
        kl = g("attention.key_length", g("embedding_length") // n_head)
        vl = g("attention.value_length", kl)
        self.attn_per_key = 2 * n_head * (kl + vl)
        self.window = g("attention.sliding_window", 0)
        ratios = g("attention.compress_ratios")
        if ratios is not None:  # deepseek4: every layer has the window; ratio 4 / 128 add compressed rows
            self.kinds = ["window" if r == 0 else "c%d" % r for r in ratios[: self.n_layer]]
        else:
            self.kinds = ["window" if self.window and i % 2 == 0 else "full" for i in range(self.n_layer)]
        self.topk = g("attention.indexer.top_k", 0)
        self.index_per_row = 2 * g("attention.indexer.head_count", 0) * g("attention.indexer.key_length", 0)
        used, count = g("expert_used_count", 0), g("expert_count", 0)
        self.matmul = 0
        for n, d in shapes.items():
            if n.startswith("blk.") and len(d) == 2 and "tid2eid" not in n:
                self.matmul += 2 * d[0] * d[1]
            elif n.startswith("blk.") and len(d) == 3 and count:
                self.matmul += 2 * d[0] * d[1] * used
        head = shapes.get("output.weight") or shapes["token_embd.weight"]
        self.head = 2 * head[0] * head[1]
        self.vocab = head[1]

    def describe(self):
        kinds = {k: self.kinds.count(k) for k in sorted(set(self.kinds))}
        return "%d layers (%s; W=%d), %.2f MFLOP/token in block matmuls" % (
            self.n_layer, ", ".join("%d %s" % (v, k) for k, v in kinds.items()), self.window, self.matmul / 1e6)

    def position(self, p, floor):
        keys = 0
        for k in self.kinds:
            if k == "full":
                keys += p + 1
                continue
            keys += min(p - floor + 1, self.window)
            if k != "window":
                rows = (p + 1) // int(k[1:])
                keys += min(rows, self.topk) if k == "c4" else rows
                if k == "c4":
                    keys += rows * self.index_per_row / self.attn_per_key
        return self.matmul + self.attn_per_key * keys

    def request(self, prompt, cached, replayed):
        floor = cached if replayed > 0 else 0
        return self.head + sum(self.position(p, floor) for p in range(cached, prompt))


class Server:
    def __init__(self, bin_, model, args, threads, ctx):
        cmd = [bin_, "serve", model, "--port", "0", "--ctx", str(ctx), "-t", str(threads)] + args
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
            self.proc.wait()
            raise RuntimeError("cinfer serve did not start: %s" % " ".join(cmd))
        self.url = "http://127.0.0.1:%d" % self.port
        self.cpu0 = self.cpu_s()

    def cpu_s(self):
        """The server's user + system CPU seconds so far (/proc/PID/stat)."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

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


# Agent workload shapes (bench serve --workload agent; lengths in words, ~1.3 tokens each here).
#   short  the first version's shape: a 200-word system prompt, 80-word tool results, 12-token answers, 5
#          turns; every turn adds ~120 tokens, less than deepseek4's 128-token replay: unlike a real agent
#   long   a coding / tool-use agent as DeepSeek describes it (long shared context, tool outputs of hundreds
#          to thousands of tokens): 2,000-word system + tool definitions, 600-word tool results, 32-token
#          answers (a tool call), 6 turns
AGENT_SHAPES = {
    "short": ["--sessions", "3", "--turns", "5", "--system-len", "200", "--tool-len", "80", "--user-len", "24",
              "--output-len", "12"],
    "long": ["--sessions", "3", "--turns", "6", "--system-len", "2000", "--tool-len", "600", "--user-len", "40",
             "--output-len", "32"],
}


def agent_args(a):
    return ["--api", "completions", "--ignore-eos", "--temperature", "0", "--no-progress", "--workload", "agent",
            "--think-time", "1.0"] + AGENT_SHAPES[a.agent_shape]


def mooncake_args(a, fm):
    """The Mooncake conversations in closed loop: `cinfer bench serve --workload conversations`."""
    return ["--api", "completions", "--ignore-eos", "--temperature", "0", "--no-progress", "--workload",
            "conversations", a.trace, "--max-requests", str(a.lines), "--min-turns", str(a.min_turns), "--turns",
            str(a.max_turns), "--conversations", str(a.sessions), "--sessions", str(a.concurrency), "--block-scale",
            str(a.block), "--time-scale", str(a.time_scale), "--think-min", str(a.min_think), "--think-max",
            str(a.max_think), "--max-output-len", str(a.max_output), "--max-context", str(a.ctx), "--token-range",
            "100:%d" % (fm.vocab - 100), "--timeout", str(int(a.timeout))]


def run_bench(a, fm, srv, tmp, wname, cname):
    """One workload through `cinfer bench serve`; the totals and the per-request records."""
    out = os.path.join(tmp, "%s-%s.json" % (wname, cname))
    args = agent_args(a) if wname == "agent" else mooncake_args(a, fm)
    subprocess.run([a.bin, "bench", "serve", "--base-url", srv.url, "--out", out] + args, check=True,
                   stdout=subprocess.DEVNULL)
    res = json.load(open(out))
    s, reqs = res["summary"], res["requests"]
    ok = [r for r in reqs if r["usage"] and r["error"] == "ok"]
    for r in reqs:
        if r not in ok:
            print("  session %d turn %d failed: %s" % (r["session"], r["turn"], r["error"]), file=sys.stderr)
    for r in ok:
        r["flops"] = fm.request(r["prompt_tokens"], r["cached_tokens"], r.get("replayed_tokens", 0))
    return dict(requests=s["requests_ok"], failed=len(reqs) - len(ok), input=s["input_tokens"],
                cached=s["cached_tokens"], replayed=s.get("replayed_tokens", 0), computed=s["computed_tokens"],
                flops=sum(r["flops"] for r in ok), ttft_mean=s["ttft_ms"]["mean"], ttft_p50=s["ttft_ms"]["p50"],
                ttft_p90=s["ttft_ms"]["p90"], records=ok)


def print_per_turn(rows):
    """Per turn index (mean over sessions): prompt tokens and their split, prefill GFLOP per config."""
    for w in sorted(set(r["workload"] for r in rows)):
        g = {r["config"]: r for r in rows if r["workload"] == w}
        turns = sorted(set(x["turn"] for r in g.values() for x in r["records"]))
        print("%s per turn (mean over sessions): prompt tokens = cached / replayed / computed, prefill MFLOP" % w)
        print("%5s %5s" % ("turn", "reqs") + "".join(" | %-27s" % c for c in g))
        for t in turns:
            line = ""
            for c, r in g.items():
                xs = [x for x in r["records"] if x["turn"] == t]
                n = max(1, len(xs))
                mean = lambda k: sum(x.get(k, 0) for x in xs) / n
                line += " | %5.0f=%4.0f/%4.0f/%4.0f %7.1f" % (
                    mean("prompt_tokens"), mean("cached_tokens"), mean("replayed_tokens"),
                    mean("prompt_tokens") - mean("cached_tokens") - mean("replayed_tokens"), mean("flops") / 1e6)
            print("%5d %5d%s" % (t, len([x for x in g["exact"]["records"] if x["turn"] == t]), line))
        print()


def print_table(rows):
    hdr = "%-9s %-10s %5s %7s %7s %8s %8s %10s %7s %9s %9s %9s %7s %8s %6s"
    print(hdr % ("workload", "config", "reqs", "input", "cached", "replayed", "computed", "prefill", "vs", "TTFT mean",
                 "TTFT p50", "TTFT p90", "server", "replays", "snap"))
    print(hdr % ("", "", "", "tokens", "", "", "", "GFLOP", "exact", "ms", "ms", "ms", "CPU s", "", "hits"))
    for r in rows:
        exact = next(x for x in rows if x["workload"] == r["workload"] and x["config"] == "exact")
        print("%-9s %-10s %5d %7d %7d %8d %8d %10.3f %6.3fx %9.1f %9.1f %9.1f %7.1f %8d %6d" % (
            r["workload"], r["config"], r["requests"], r["input"], r["cached"], r["replayed"], r["computed"],
            r["flops"] / 1e9, r["flops"] / exact["flops"], r["ttft_mean"], r["ttft_p50"], r["ttft_p90"], r["cpu_s"],
            r["replays"], r["state_hits"]))
    for w in sorted(set(r["workload"] for r in rows)):
        g = {r["config"]: r for r in rows if r["workload"] == w}
        print("%s: bounded replay does %.1f%% of exact recompute's prefill work (%.1f%% of no cache; exact-kept "
              "%.1f%%); TTFT mean %.2fx, server CPU %.2fx of exact" % (
                  w, 100 * g["replay"]["flops"] / g["exact"]["flops"], 100 * g["replay"]["flops"] / g["no-cache"]["flops"],
                  100 * g["exact-kept"]["flops"] / g["exact"]["flops"], g["replay"]["ttft_mean"] / g["exact"]["ttft_mean"],
                  g["replay"]["cpu_s"] / max(1e-9, g["exact"]["cpu_s"])))


def check_equal_requests(rows):
    """Every configuration of a workload must complete the same requests, all of them. Mooncake
    prompts come from the trace alone, so their input tokens must be equal too; the agent
    workload's prompts contain the previous answers, which bounded replay may change (it is an
    approximation), so there they may differ by a few tokens."""
    bad = []
    for w in sorted(set(r["workload"] for r in rows)):
        g = [r for r in rows if r["workload"] == w]
        same_input = w != "mooncake" or len(set(r["input"] for r in g)) == 1
        if len(set(r["requests"] for r in g)) != 1 or not same_input or any(r["failed"] for r in g):
            bad.append("%s: %s" % (w, ", ".join("%s %d ok / %d failed / %d input tokens" % (
                r["config"], r["requests"], r["failed"], r["input"]) for r in g)))
    for b in bad:
        print("NOT COMPARABLE - configurations completed different requests: " + b)
    return not bad


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bin")
    p.add_argument("model")
    p.add_argument("trace")
    p.add_argument("threads", type=int)
    p.add_argument("--workloads", default="agent,mooncake", help="comma list of agent, mooncake")
    p.add_argument("--agent-shape", choices=sorted(AGENT_SHAPES), default="long",
                   help="agent workload shape (default long; short: the first version's)")
    p.add_argument("--ctx", type=int, default=2048, help="--ctx of the server; longer conversations are skipped")
    p.add_argument("--kv-memory", default="1", help="--kv-memory GiB, the same for every configuration")
    p.add_argument("--lines", type=int, default=4000, help="the conversations come from the first N trace lines")
    p.add_argument("--sessions", type=int, default=24, help="conversations replayed (the first ones that fit)")
    p.add_argument("--min-turns", type=int, default=3)
    p.add_argument("--max-turns", type=int, default=6, help="turns kept per conversation (its first ones)")
    p.add_argument("--concurrency", type=int, default=4, help="conversations running at once")
    p.add_argument("--block-scale", dest="block", type=int, default=16, help="tokens per trace hash block")
    p.add_argument("--time-scale", type=float, default=100.0, help="think time = trace gap / this")
    p.add_argument("--min-think", type=float, default=0.2, help="seconds (> the 0.05 s window-state TTL)")
    p.add_argument("--max-think", type=float, default=2.0, help="seconds")
    p.add_argument("--max-output", type=int, default=12, help="cap on each turn's max_tokens")
    p.add_argument("--timeout", type=float, default=600.0, help="per request, seconds")
    a = p.parse_args(argv)
    wl = a.workloads.split(",")
    if not wl or any(w not in ("agent", "mooncake") for w in wl) or len(set(wl)) != len(wl):
        p.error("--workloads: a comma list of agent, mooncake (each once)")
    if min(a.lines, a.sessions, a.min_turns, a.max_turns, a.concurrency, a.block, a.max_output) < 1 or a.block > 512:
        p.error("--sessions, --min-turns, --max-turns, --concurrency, --max-output must be >= 1, "
                "--block-scale in [1, 512]")
    if a.time_scale <= 0 or a.min_think < 0 or a.max_think < a.min_think:
        p.error("--time-scale must be > 0 and 0 <= --min-think <= --max-think")
    return a


def main(argv):
    a = parse_args(argv)
    fm = FlopModel(a.model)
    print("model %s: %s" % (os.path.basename(a.model), fm.describe()))
    wl = a.workloads.split(",")
    if "mooncake" in wl:
        print("Mooncake, closed loop (cinfer bench serve --workload conversations): the first %d conversations of "
              ">= %d turns (first %d turns kept) in trace lines 0..%d whose turns fit --ctx %d; %d at a time, %d "
              "tokens per hash block, think time = gap / %g clamped to [%g, %g] s" % (
                  a.sessions, a.min_turns, a.max_turns, a.lines - 1, a.ctx, a.concurrency, a.block, a.time_scale,
                  a.min_think, a.max_think))
    rows = []
    tmp = tempfile.mkdtemp(prefix="cinfer-swa-bench-")
    try:
        for wname in wl:
            for cname, cargs in CONFIGS:
                srv = Server(a.bin, a.model, cargs + ["--kv-memory", a.kv_memory], a.threads, a.ctx)
                try:
                    r = run_bench(a, fm, srv, tmp, wname, cname)
                    r.update(workload=wname, config=cname, cpu_s=srv.cpu_s() - srv.cpu0,
                             replays=srv.metric("cinfer_swa_replays_total"),
                             state_hits=srv.metric("cinfer_swa_state_hits_total"))
                finally:
                    srv.stop()
                rows.append(r)
                print("  %-9s %-10s done: %d requests, %d failed" % (wname, cname, r["requests"], r["failed"]),
                      file=sys.stderr)
    finally:
        shutil.rmtree(tmp)
    print()
    print_per_turn(rows)
    print_table(rows)
    return 0 if check_equal_requests(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
