"""pd_compare.py - the table of bench/pd_compare.sh (issue 19 benchmark): one row per (workload,
configuration) from the `cinfer bench serve` results JSON and the workers' /metrics snapshots the
shell script saved in RUN_DIR.

  python3 bench/pd_compare.py attn-cost MODEL.gguf
      the router's --attn-cost for MODEL (base/compute_cost.c's cf_attn_weight on its GGUF shape)
  python3 bench/pd_compare.py table RUN_DIR MODEL.gguf SLO_TTFT_MS SLO_TPOT_MS
      prints the table and the KV-bytes comparison

Files per run in RUN_DIR (LABEL = WORKLOAD-CONFIG): LABEL.json (bench serve --out), LABEL.txt (its
table), LABEL.<worker>.before.prom / .after.prom (the worker's /metrics before and after the run,
worker = w0, w1, p, d), LABEL.router.prom (the router's /metrics at the end), LABEL.cpu (one line per
worker process: name, CPU seconds (utime + stime) used during the run).

Definitions (stated again in the output):
- TTFT / TPOT: the client's (bench serve); p50 and p99 over successful requests.
- goodput: successful requests with TTFT <= SLO_TTFT_MS and TPOT <= SLO_TPOT_MS (a request of one
  output token has no TPOT and counts on TTFT alone), per second of the run; attainment = their
  share of the requests sent.
- cache hit: prompt tokens the workers that computed the prompt served from their prefix cache
  (memory or store), from the workers' /metrics: cinfer_cached_tokens_total /
  cinfer_prompt_tokens_total summed over the workers that prefill (in 1P+1D: P only, since D
  reports the handed-off tokens as cached). "client" is what the answers' usage says.
- KV moved per request: the decode worker's cinfer_handoff_received_bytes_total (all paths; the
  router's successful handoffs are listed beside it), against the arithmetic: for each request,
  floor((prompt_tokens - 1) / block_tokens) full blocks (what a prefill worker hands over, the last
  prompt token and the partial last block are recomputed by D, docs/pd.md) x block_tokens x KV bytes
  per token (n_layer x n_head_kv x (key_length + value_length) x 4 bytes: the f32 KV cache, the
  engine default). Store bytes read (cinfer_kv_store_bytes_read_total) are listed beside it."""
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swa_replay_serve import read_gguf_shapes  # noqa: E402  (the GGUF metadata reader, one copy)

KV_DTYPE_BYTES = 4  # CINFER_KV_DTYPE_DEFAULT is f32 (include/cinfer/engine.h); the script passes no --kv-dtype


def model_shape(path):
    meta, shapes = read_gguf_shapes(path)
    arch = meta["general.architecture"]
    g = lambda k, d=None: meta.get("%s.%s" % (arch, k), d)  # noqa: E731
    n_embd, n_head = g("embedding_length"), g("attention.head_count")
    head_dim = g("attention.key_length", n_embd // n_head)
    vlen = g("attention.value_length", head_dim)
    n_vocab = g("vocab_size") or len(meta.get("tokenizer.ggml.tokens", []))
    return {"arch": arch, "n_layer": g("block_count"), "n_embd": n_embd, "n_head": n_head,
            "n_head_kv": g("attention.head_count_kv", n_head), "head_dim": head_dim, "v_dim": vlen,
            "n_ff": g("feed_forward_length"), "n_vocab": n_vocab}


def attn_cost(s):
    """cf_attn_weight (base/compute_cost.c) on the model's shape."""
    qdim, kvdim = s["n_head"] * s["head_dim"], s["n_head_kv"] * s["head_dim"]
    per_layer = 2.0 * s["n_embd"] * qdim + 2.0 * s["n_embd"] * kvdim + 3.0 * s["n_embd"] * s["n_ff"]
    weights = s["n_layer"] * per_layer + float(s["n_embd"]) * s["n_vocab"]
    return 4.0 * s["n_layer"] * qdim / (2.0 * weights)


def kv_bytes_per_token(s):
    return s["n_layer"] * s["n_head_kv"] * (s["head_dim"] + s["v_dim"]) * KV_DTYPE_BYTES


def prom(path):
    """Sum of each metric name's samples whose labels pass (all by default): {name: value}, plus
    {name{labels}: value} for every sample."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
            if not m or line.startswith("#"):
                continue
            try:
                v = float(m.group(3))
            except ValueError:
                continue
            out[m.group(1)] = out.get(m.group(1), 0.0) + v
            if m.group(2):
                out[m.group(1) + m.group(2)] = v
    return out


def delta(run_dir, label, worker, name):
    a = prom(os.path.join(run_dir, "%s.%s.after.prom" % (label, worker)))
    b = prom(os.path.join(run_dir, "%s.%s.before.prom" % (label, worker)))
    return a.get(name, 0.0) - b.get(name, 0.0)


def pct(xs, q):
    """Percentile with linear interpolation (as numpy and bench serve)."""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def workers_of(run_dir, label):
    return sorted({f.split(".")[1] for f in os.listdir(run_dir)
                   if f.startswith(label + ".") and f.endswith(".after.prom")})


def row(run_dir, label, shape, slo_ttft, slo_tpot, block_tokens):
    with open(os.path.join(run_dir, label + ".json")) as f:
        res = json.load(f)
    summ, reqs = res["summary"], res["requests"]
    ok = [r for r in reqs if r.get("error") == "ok"]
    ttft = [r["ttft_s"] * 1000 for r in ok if r.get("ttft_s") is not None]
    tpot = [(r["end_s"] - r["ttft_s"] - r["sent_s"]) * 1000 / (r["output_tokens"] - 1)
            for r in ok if r.get("ttft_s") is not None and r["output_tokens"] > 1]
    good = 0
    for r in ok:
        if r.get("ttft_s") is None or r["ttft_s"] * 1000 > slo_ttft:
            continue
        n = r["output_tokens"]
        if n > 1 and (r["end_s"] - r["ttft_s"] - r["sent_s"]) * 1000 / (n - 1) > slo_tpot:
            continue
        good += 1
    workers = workers_of(run_dir, label)
    prefillers = [w for w in workers if w != "d"]
    prompt = sum(delta(run_dir, label, w, "cinfer_prompt_tokens_total") for w in prefillers)
    cached = sum(delta(run_dir, label, w, "cinfer_cached_tokens_total") for w in prefillers)
    store_read = sum(delta(run_dir, label, w, "cinfer_kv_store_bytes_read_total") for w in workers)
    rx = delta(run_dir, label, "d", "cinfer_handoff_received_bytes_total") if "d" in workers else 0.0
    exported = delta(run_dir, label, "p", "cinfer_handoff_exported_blocks_total") if "p" in workers else 0.0
    router = prom(os.path.join(run_dir, label + ".router.prom"))
    handoffs_ok = router.get('cinfer_router_handoffs_total{result="ok"}', 0.0)
    handoffs_failed = router.get('cinfer_router_handoffs_total{result="failed"}', 0.0)
    per_tok = kv_bytes_per_token(shape)
    arith = [max(0, (r["prompt_tokens"] - 1) // block_tokens) * block_tokens * per_tok for r in ok]
    cpu = {}
    cpath = os.path.join(run_dir, label + ".cpu")
    if os.path.exists(cpath):
        with open(cpath) as f:
            for line in f:
                p = line.split()
                if len(p) == 2:
                    cpu[p[0]] = float(p[1])
    return {
        "label": label, "sent": summ["requests_sent"], "ok": summ["requests_ok"], "dur": summ["duration_s"],
        "ttft50": pct(ttft, 50), "ttft99": pct(ttft, 99), "tpot50": pct(tpot, 50), "tpot99": pct(tpot, 99),
        "goodput": good / summ["duration_s"] if summ["duration_s"] > 0 else 0.0,
        "attain": good / summ["requests_sent"] if summ["requests_sent"] else 0.0,
        "hit": cached / prompt if prompt else float("nan"),
        "client_hit": summ["cache_hit_ratio"], "out_tok_s": summ["output_tok_s"],
        "computed": summ["computed_tokens"], "prompt_workers": prompt,
        "rx": rx, "exported": exported, "handoffs_ok": handoffs_ok, "handoffs_failed": handoffs_failed,
        "arith_total": float(sum(arith)), "store_read": store_read,
        "cpu": cpu, "first_error": summ.get("first_error"),
    }


def fmt_ms(x):
    return "-" if x != x else ("%.0f" % x if x >= 100 else "%.1f" % x)


def table(run_dir, model, slo_ttft, slo_tpot):
    shape = model_shape(model)
    labels = sorted(f[:-5] for f in os.listdir(run_dir) if f.endswith(".json") and "." not in f[:-5])
    order = {"mooncake": 0, "agent": 1}
    cfg_order = ["one-2t", "two-round_robin", "two-least_requests", "two-cache_affinity",
                 "two-prefill_compute", "two-decode_load", "two-prefill_compute-store", "two-sglang-cache_aware", "pd-1p1d"]
    key = lambda lb: (order.get(lb.split("-", 1)[0], 9),  # noqa: E731
                      cfg_order.index(lb.split("-", 1)[1]) if lb.split("-", 1)[1] in cfg_order else 99, lb)
    labels.sort(key=key)
    block_tokens = 16
    bt_path = os.path.join(run_dir, "block_tokens")
    if os.path.exists(bt_path):
        with open(bt_path) as f:
            block_tokens = int(f.read().strip() or 16)
    rows = [row(run_dir, lb, shape, slo_ttft, slo_tpot, block_tokens) for lb in labels]
    per_tok = kv_bytes_per_token(shape)
    print("model: %s, %d layers, width %d, %d heads, %d KV heads, head %d, ffn %d, vocab %d; KV f32: "
          "%d bytes per token (%d x %d x (%d + %d) x 4), block %d tokens = %.0f KiB"
          % (shape["arch"], shape["n_layer"], shape["n_embd"], shape["n_head"], shape["n_head_kv"],
             shape["head_dim"], shape["n_ff"], shape["n_vocab"], per_tok, shape["n_layer"], shape["n_head_kv"],
             shape["head_dim"], shape["v_dim"], block_tokens, per_tok * block_tokens / 1024.0))
    print("SLO: TTFT <= %g ms and TPOT <= %g ms; goodput = requests meeting both per second of the run"
          % (slo_ttft, slo_tpot))
    print()
    print("| workload / configuration | ok/sent | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | goodput (req/s) "
          "| SLO met | cache hit (prefill workers / client) | output tok/s | worker CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = " + ".join("%s %.1f" % (k, v) for k, v in sorted(r["cpu"].items()))
        print("| %s | %d/%d | %s / %s | %s / %s | %.3f | %.0f%% | %.1f%% / %.1f%% | %.1f | %s |"
              % (r["label"], r["ok"], r["sent"], fmt_ms(r["ttft50"]), fmt_ms(r["ttft99"]), fmt_ms(r["tpot50"]),
                 fmt_ms(r["tpot99"]), r["goodput"], 100 * r["attain"], 100 * r["hit"], 100 * r["client_hit"],
                 r["out_tok_s"], cpu or "-"))
    print()
    print("KV bytes moved per request (1P+1D: over UCX, all bytes D received, per successful request; the")
    print("arithmetic is what a handoff of every successful request moves, so it is listed for every row; store")
    print("reads for every configuration):")
    print()
    print("| workload / configuration | handoffs ok / failed | received at D per request | P exported blocks "
          "| arithmetic per request (full blocks x block x %d B) | measured / arithmetic (totals) "
          "| store bytes read per request |" % per_tok)
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        n, ok = r["handoffs_ok"], max(r["ok"], 1)
        ratio = ("%.4f" % (r["rx"] / r["arith_total"])) if r["rx"] and r["arith_total"] else "-"
        print("| %s | %d / %d | %s | %d | %s | %s | %s |"
              % (r["label"], n, r["handoffs_failed"], ("%.2f MiB" % (r["rx"] / ok / 2**20)) if r["rx"] else "-",
                 r["exported"], "%.2f MiB" % (r["arith_total"] / ok / 2**20), ratio,
                 "%.2f MiB" % (r["store_read"] / ok / 2**20)))
    errs = [(r["label"], r["first_error"]) for r in rows if r["first_error"]]
    if errs:
        print()
        for lb, e in errs:
            print("first error in %s: %s" % (lb, e))


def main(argv):
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) == 3 and argv[1] == "attn-cost":
        print("%.6g" % attn_cost(model_shape(argv[2])))
        return 0
    if len(argv) == 6 and argv[1] == "table":
        table(argv[2], argv[3], float(argv[4]), float(argv[5]))
        return 0
    print("usage: pd_compare.py attn-cost MODEL.gguf | table RUN_DIR MODEL.gguf SLO_TTFT_MS SLO_TPOT_MS",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
