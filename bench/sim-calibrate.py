#!/usr/bin/env python3
"""sim-calibrate.py - calibrates the simulator's CPU profile (sim/hw/cpu-local.json)
from a live cinfer worker's own timings (docs/sim.md "Live validation").

One cinfer worker (serve's defaults, -t THREADS) is driven by `cinfer bench
serve` with one request in flight (--concurrency 1), token-id prompts of each
length in --lengths and max_tokens 1, Poisson gaps at --rate (the live run's
idle gaps). Around each length the server's /metrics are read:

  client TTFT  bench serve's per-request time to first token
  forward      cinfer_engine_phase_seconds_total{phase="forward"} delta / requests
               (with max_tokens 1 a request is exactly its prefill pass)
  server TTFT  cinfer_time_to_first_token_seconds sum delta / count delta
               (the HTTP request's arrival to its first output, in the server)

Measured terms (each maps to one field of the hardware profile, the same
fields every profile has; sim_cost.h / sim_profile.h):

  request_overhead_s, prompt_token_overhead_s
      overhead = client TTFT - forward (HTTP, JSON, prompt preparation,
      submission, engine wake-up, first-token output), fitted as a + b x prompt
      tokens by least squares (b < 0: no measurable per-token cost, b = 0 and
      a = the mean overhead)
  mfu  the prefill forward passes of the lengths >= --mfu-min-len (64: there the
      cost model is compute-bound on this VM even at mfu 1): mfu = (2 x active x T / flops_fp8 + attention /
      flops_bf16) / forward (sim_cost.h's compute term at mfu 1); the mean
  hbm_bw (mbu 1)  decode: requests of a 1-token prompt and --decode-out
      output tokens, so every pass is a one-token step; seconds per step =
      forward / passes; bytes per step = dense weights + KV read and written
      at the mean context (sim_cost.h's memory term)

Every prompt is distinct (a seed per run), so there are no prefix hits.
Prints a table and the profile values; --out writes everything as JSON;
--write-profile FILE sets the four fields of that hardware profile (with
their sources). Exit 1 on a failed server start or benchmark run."""
import argparse
import datetime
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request


def metrics(base):
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        text = r.read().decode()

    def value(name, phase=None):  # the server adds labels (model_name=...) to every series
        lab = r'\{[^}]*phase="%s"[^}]*\}' % phase if phase else r"(?:\{[^}]*\})?"
        m = re.search(r"^%s%s (\S+)" % (re.escape(name), lab), text, re.M)
        return float(m.group(1)) if m else None

    v = {"forward": value("cinfer_engine_phase_seconds_total", "forward"),
         "ttft_sum": value("cinfer_time_to_first_token_seconds_sum"),
         "ttft_n": value("cinfer_time_to_first_token_seconds_count"), "steps": value("cinfer_engine_steps_total")}
    if None in v.values():
        sys.exit("sim-calibrate.py: /metrics lacks the engine phase seconds or the TTFT histogram (old server?)")
    return v


def start_server(args, log):
    port = 20000 + random.randrange(20000)
    srv = subprocess.Popen([args.bin, "serve", "-m", args.model, "--port", str(port), "-t", str(args.threads)],
                           stdout=log, stderr=subprocess.STDOUT)
    base = "http://127.0.0.1:%d" % port
    for _ in range(600):
        if srv.poll() is not None:
            break
        try:
            with urllib.request.urlopen(base + "/ready", timeout=5):
                return srv, base
        except OSError:
            time.sleep(0.5)
    srv.kill()
    srv.wait()
    sys.exit("sim-calibrate.py: the server did not start (see %s)" % log.name)


def run_requests(args, base, length, out_len, seed, tmp):
    """One request at a time; returns the measured row."""
    out = os.path.join(tmp, "run%d.json" % seed)
    before = metrics(base)
    cmd = [args.bin, "bench", "serve", "--base-url", base, "--api", "completions", "--ignore-eos", "--no-progress",
           "--requests", str(args.repeats), "--input-len", str(length), "--output-len", str(out_len),
           "--concurrency", "1", "--rate", str(args.rate), "--seed", str(seed), "--out", out]
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if rc.returncode != 0:
        sys.exit("sim-calibrate.py: bench serve failed at length %d: %s" % (length, rc.stderr.strip()))
    after = metrics(base)
    with open(out) as f:
        reqs = json.load(f)["requests"]
    ok = [r for r in reqs if r["error"] == "ok" and r["ttft_s"] is not None and r["output_tokens"] == out_len]
    if len(ok) != args.repeats:
        sys.exit("sim-calibrate.py: %d of %d requests failed at length %d" % (args.repeats - len(ok), args.repeats,
                                                                             length))
    n = float(len(ok))
    client = sum(r["ttft_s"] for r in ok) / n
    forward = (after["forward"] - before["forward"]) / n
    server = (after["ttft_sum"] - before["ttft_sum"]) / max(after["ttft_n"] - before["ttft_n"], 1)
    return {"prompt_tokens": sum(r["prompt_tokens"] for r in ok) / n, "output_tokens": out_len,
            "requests": len(ok), "steps_per_request": (after["steps"] - before["steps"]) / n,
            "client_ttft_s": client, "server_ttft_s": server, "forward_s": forward, "overhead_s": client - forward,
            "client_http_s": client - server, "server_other_s": server - forward,
            "client_ttft_each_s": [r["ttft_s"] for r in ok]}


def fit_line(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


def num(profile, key):
    v = profile[key]
    return float(v["value"] if isinstance(v, dict) else v)


def cost_terms(hw, model, tokens, start, prefill):
    """sim_cost.h's compute term at mfu 1 and bytes of the memory term for one item of `tokens` positions
    after `start` (a prefill chunk or a decode item)."""
    pairs = tokens * start + tokens * (tokens + 1) / 2.0
    key = "attn_flops_per_ctx_prefill" if prefill and "attn_flops_per_ctx_prefill" in model else "attn_flops_per_ctx"
    attn = num(model, key)
    compute1 = 2.0 * num(model, "active_params") * tokens / num(hw, "flops_fp8") + attn * pairs / num(hw, "flops_bf16")
    kv_bytes = sum(num(k, "bytes_per_token") / (num(k, "compression") if "compression" in k else 1.0)
                   for k in model["cache_kinds"] if not k.get("window"))
    step_bytes = num(model, "dense_params") * num(model, "weight_bytes") + (start + 2 * tokens) * kv_bytes
    return compute1, step_bytes


def calibrate(args, rows, decode, hw, model):
    a, b = fit_line([r["prompt_tokens"] for r in rows], [r["overhead_s"] for r in rows])
    fixed, per_token = (a, b) if b >= 0 else (sum(r["overhead_s"] for r in rows) / len(rows), 0.0)
    decode_step = decode["forward_s"] / decode["steps_per_request"]
    depth = decode["prompt_tokens"] + decode["output_tokens"] / 2.0
    _, decode_bytes = cost_terms(hw, model, 1, depth, False)
    decode.update({"decode_step_s": decode_step, "mean_context": depth, "bytes_per_step": decode_bytes})
    hbm_bw = decode_bytes / decode_step
    mfus = []
    for r in rows:
        compute1, step_bytes = cost_terms(hw, model, r["prompt_tokens"], 0, True)
        r["mfu"] = compute1 / r["forward_s"]
        # the forward seconds measure the compute term where the cost model is compute-bound; a bandwidth
        # measured under load is CPU-starved like everything else, so the split is by length (--mfu-min-len)
        # and the roofline check against the measured bandwidth is only reported
        r["compute_bound"] = compute1 > step_bytes / hbm_bw
        if r["prompt_tokens"] >= args.mfu_min_len:
            mfus.append(r["mfu"])
    if not mfus:
        sys.exit("sim-calibrate.py: no prefill length >= --mfu-min-len %d" % args.mfu_min_len)
    return {"request_overhead_s": fixed, "prompt_token_overhead_s": per_token, "mfu": sum(mfus) / len(mfus),
            "hbm_bw": hbm_bw, "fit_a_s": a, "fit_b_s_per_token": b}


def write_profile(path, cal, args, load):
    with open(path) as f:
        prof = json.load(f)
    when = "%s, load %.1f" % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), load)
    src = "bench/sim-calibrate.py (%s; %s)" % (args.out or "stdout", when)
    prof["request_overhead_s"] = {"value": round(cal["request_overhead_s"], 5), "source": (
        "%s: client TTFT - server forward seconds, fitted a + b x prompt tokens over lengths %s; a" %
        (src, args.lengths))}
    prof["prompt_token_overhead_s"] = {"value": round(cal["prompt_token_overhead_s"], 8),
                                       "source": "%s: the same fit's b (0 when negative)" % src}
    prof["mfu"] = {"value": round(cal["mfu"], 4), "source": (
        "%s: sim_cost.h's compute term at mfu 1 / the server's forward seconds of the compute-bound prefill "
        "lengths, mean (one request in flight, Poisson gaps at %g/s)" % (src, args.rate))}
    prof["hbm_bw"] = {"value": round(cal["hbm_bw"], -6), "source": (
        "%s: sim_cost.h's decode-step bytes (weights + context KV) / the server's decode forward seconds per step "
        "(1 prompt + %d output tokens); mbu 1" % (src, args.decode_out))}
    with open(path, "w") as f:
        json.dump(prof, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="GGUF model the worker serves")
    ap.add_argument("--bin", default=os.environ.get("CINFER_BIN", "build/cinfer"))
    ap.add_argument("--hw", default="sim/hw/cpu-local.json", help="hardware profile (peaks; default cpu-local)")
    ap.add_argument("--model-profile", default="sim/model/tinyllama-1.1b-q8_0.json")
    ap.add_argument("--lengths", default="1,128,256", help="prompt lengths in tokens (default 1,128,256)")
    ap.add_argument("--repeats", type=int, default=3, help="requests per length (default 3)")
    ap.add_argument("--decode-out", type=int, default=33, help="decode run: output tokens (default 33)")
    ap.add_argument("--rate", type=float, default=float(os.environ.get("RATE", "0.1")),
                    help="Poisson request rate, as the live run's (default $RATE or 0.1)")
    ap.add_argument("--mfu-min-len", type=int, default=64,
                    help="prefill lengths >= this calibrate mfu (default 64: on this VM the compute term at mfu 1, "
                         "120 ms, already exceeds the 47 ms weight stream)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log", default="bench/results/sim/calibrate-server.log")
    ap.add_argument("--out", help="JSON results")
    ap.add_argument("--write-profile", metavar="FILE", help="set the measured fields of this hardware profile")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    if len(lengths) < 2 or min(lengths) < 1 or args.repeats < 1 or args.rate <= 0 or args.decode_out < 2:
        sys.exit("sim-calibrate.py: needs >= 2 lengths >= 1, --repeats >= 1, --rate > 0, --decode-out >= 2")
    with open(args.hw) as f:
        hw = json.load(f)
    with open(args.model_profile) as f:
        model = json.load(f)
    load = os.getloadavg()[0]
    with open(args.log, "w") as log, tempfile.TemporaryDirectory() as tmp:
        srv, base = start_server(args, log)
        try:
            rows = [run_requests(args, base, length, 1, 1000 + length, tmp) for length in lengths]
            decode = run_requests(args, base, 1, args.decode_out, 5000, tmp)
        finally:
            srv.terminate()
            srv.wait()
    cal = calibrate(args, rows, decode, hw, model)
    print("machine load %.1f at the start; one request in flight, Poisson gaps at %g/s, %d per row" %
          (load, args.rate, args.repeats))
    print("%7s %6s %10s %10s %10s %10s %9s %10s %6s" % ("prompt", "steps", "client ms", "server ms", "forward ms",
                                                         "overhead", "http ms", "srv-other", "mfu"))
    for r in rows:
        print("%7.0f %6.2f %10.1f %10.1f %10.1f %10.1f %9.1f %10.1f %6.3f%s" % (
            r["prompt_tokens"], r["steps_per_request"], r["client_ttft_s"] * 1e3, r["server_ttft_s"] * 1e3,
            r["forward_s"] * 1e3, r["overhead_s"] * 1e3, r["client_http_s"] * 1e3, r["server_other_s"] * 1e3,
            r["mfu"], ("" if r["prompt_tokens"] >= args.mfu_min_len else " (short: not used for mfu)") +
            ("" if r["compute_bound"] else " (memory-bound at mfu 1 by the measured bandwidth)")))
    print("decode  %d prompt + %d output tokens, %.1f passes: %.2f ms per pass at mean context %.0f, %.1f MiB each" % (
        decode["prompt_tokens"], args.decode_out, decode["steps_per_request"], decode["decode_step_s"] * 1e3, decode["mean_context"],
        decode["bytes_per_step"] / 2 ** 20))
    print("fit     overhead = %.2f ms + %.5f ms x prompt tokens%s" % (
        cal["fit_a_s"] * 1e3, cal["fit_b_s_per_token"] * 1e3,
        "" if cal["fit_b_s_per_token"] >= 0 else " (slope < 0: per-token term 0, fixed = mean overhead)"))
    print("profile request_overhead_s %.5f  prompt_token_overhead_s %.8f  mfu %.4f  hbm_bw %.3g" % (
        cal["request_overhead_s"], cal["prompt_token_overhead_s"], cal["mfu"], cal["hbm_bw"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"model": args.model, "rate": args.rate, "repeats": args.repeats, "threads": args.threads,
                       "load": load, "rows": rows, "decode": decode, "profile": cal}, f, indent=1)
    if args.write_profile:
        write_profile(args.write_profile, cal, args, load)


if __name__ == "__main__":
    main()
