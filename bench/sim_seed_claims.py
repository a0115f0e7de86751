#!/usr/bin/env python3
"""sim_seed_claims.py - the simulator runs behind docs/sim.md "Seed's claims" (issue 21).

usage: bench/sim_seed_claims.py [CINFER_BIN]   (default build/cinfer; writes
bench/results/sim/seed-claims.{txt,json})

Three sweeps of `cinfer sim` on DeepSeek-V4-Flash over GB200 NVL72 (sim/clusters/seed-*.json),
each a `--sweep time-scale=...` of one synthetic workload: 30k-token inputs of which 96% are one of
64 shared prefixes (the seed's 96% hit rate), 600 output tokens, Poisson arrivals.
  decode   seed-decode-gb200.json: prefill oversized, so the decode unit (72 GPUs) sets the pace;
           output tok/s per decode GPU against TPOT (tok/s per user = 1/TPOT).
  prefill  seed-prefill-gb200.json: one 8-GPU prefill unit, decode oversized; cache-inclusive and
           computed input tok/s per prefill GPU against TTFT.
  mix      seed-mix-gb200.json: a whole disaggregated cluster at the seed's ratio of pools, for the
           economics (revenue and cost per accelerator-hour at R1 list prices).
From the operating points the script derives the cluster size that 155 T tokens/day needs under
two token mixes and the price that $38 per accelerator-hour needs. Every number in the output
comes from one of these runs or from arithmetic on them, printed next to it."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cinfer")
OUT = os.path.join(HERE, "results", "sim")
WORKLOAD = ["--workload", "synthetic", "--input-len", "30000", "--output-len", "600",
            "--prefix-share", "0.96", "--prefix-pool", "64", "-q"]


def sweep(cluster, rate, seconds, scales):
    """Runs one time-scale sweep; returns the list of result objects."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        n = int(rate * seconds)
        cmd = [BIN, "sim", os.path.join(ROOT, "sim", "clusters", cluster), *WORKLOAD,
               "-n", str(n), "--rate", str(rate), "--sweep",
               "time-scale=" + ",".join(str(s) for s in scales), "-o", out.name]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out.name) as f:
            return " ".join(cmd[1:]).replace(ROOT + "/", ""), json.load(f)


def main():
    lines, record = [], {}

    def say(s=""):
        print(s)
        lines.append(s)

    cmd, dec = sweep("seed-decode-gb200.json", 500, 60, [1, 2, 3, 4, 5, 6, 7, 8])
    record["decode"] = {"command": cmd, "runs": dec}
    say("## decode: one NVL72 decode unit (72 GPUs, EP72/DP72, MTP 1 draft at 85%)")
    say("cinfer " + cmd)
    say("| offered req/s | output tok/s per decode GPU | TPOT p50 ms | tok/s per user | decode busy |")
    say("|---|---|---|---|---|")
    best_230 = None
    for r in dec:
        tpot = r["tpot_s"]["p50"]
        per_gpu = r["tokens_per_s"]["decode_output_per_accel"]
        say("| %.0f | %.0f | %.2f | %.0f | %.0f%% |" % (500 * r["time-scale"], per_gpu, tpot * 1e3,
                                                    1 / tpot, 100 * r["utilisation"]["decode"]))
        if 1 / tpot >= 230 and (best_230 is None or per_gpu > best_230[0]):
            best_230 = (per_gpu, 1 / tpot)
    peak = max(r["tokens_per_s"]["decode_output_per_accel"] for r in dec)
    say()

    cmd, pre = sweep("seed-prefill-gb200.json", 40, 60, [1, 2, 3, 4, 5, 6, 8, 10])
    record["prefill"] = {"command": cmd, "runs": pre}
    say("## prefill: one 8-GPU prefill unit (EP8/DP8), 96% shared prefixes")
    say("cinfer " + cmd)
    say("| offered req/s | input tok/s per prefill GPU (cache-inclusive) | computed per GPU | hit rate | TTFT p50 s | TTFT p99 s | prefill busy |")
    say("|---|---|---|---|---|---|---|")
    pre_ok = None
    for r in pre:
        t = r["tokens_per_s"]
        say("| %.0f | %.0f | %.0f | %.1f%% | %.3f | %.3f | %.0f%% |" % (
            40 * r["time-scale"], t["prefill_input_per_accel"], t["prefill_computed_per_accel"],
            100 * r["hit_rate"], r["ttft_s"]["p50"], r["ttft_s"]["p99"], 100 * r["utilisation"]["prefill"]))
        if r["ttft_s"]["p99"] <= 2.0 and (pre_ok is None or t["prefill_input_per_accel"] > pre_ok):
            pre_ok = t["prefill_input_per_accel"]
    say()

    cmd, mix = sweep("seed-mix-gb200.json", 1500, 60, [1, 1.5, 2, 2.5])
    record["mix"] = {"command": cmd, "runs": mix}
    say("## whole cluster: 8 prefill units of 8 GPUs + 1 decode unit of 72 (136 GPUs), R1 list prices")
    say("cinfer " + cmd)
    say("| offered req/s | tokens/s (input + output) | input tok/s per prefill GPU (computed) | output tok/s per decode GPU | hit rate | TTFT p50 / p99 s | TPOT p50 ms | revenue per accel-hour | cost per accel-hour |")
    say("|---|---|---|---|---|---|---|---|---|")
    mix_ok = None
    for r in mix:
        t, e = r["tokens_per_s"], r["economics"]
        say("| %.0f | %.2f M | %.0f (%.0f) | %.0f | %.1f%% | %.3f / %.3f | %.2f | $%.2f | $%.2f |" % (
            1500 * r["time-scale"], (t["input"] + t["output"]) / 1e6, t["prefill_input_per_accel"],
            t["prefill_computed_per_accel"], t["decode_output_per_accel"], 100 * r["hit_rate"],
            r["ttft_s"]["p50"], r["ttft_s"]["p99"], r["tpot_s"]["p50"] * 1e3,
            e["revenue_per_accel_hour"], e["cost_per_accel_hour"]))
        if r["ttft_s"]["p50"] <= 1.0 and (mix_ok is None or t["prefill_input_per_accel"] > mix_ok[0]):
            mix_ok = (t["prefill_input_per_accel"], e["revenue_per_accel_hour"])
    say()

    say("## derived")
    dec_230 = best_230[0] if best_230 else float("nan")
    say("decode: best output tok/s per GPU with TPOT <= 4.35 ms (230 tok/s per user): %.0f; peak %.0f" %
        (dec_230, peak))
    say("prefill, one unit alone: best cache-inclusive input tok/s per GPU with TTFT p99 <= 2 s: %.0f" % (pre_ok or 0))
    say("prefill, whole cluster (8 units, prefix-aware placement): the same with TTFT p50 <= 1 s: %.0f" % mix_ok[0])
    pre_ok = mix_ok[0]
    tok_s = 155e12 / 86400
    for name, in_share in (("day-6 mix (78% input)", 608 / 776), ("agent mix (98% input)", 0.98)):
        gpus_p = tok_s * in_share / pre_ok
        gpus_d = tok_s * (1 - in_share) / dec_230
        say("155 T/day = %.2f B tok/s, %s: %.0f prefill GPUs + %.0f decode GPUs = %.0f GPUs" %
            (tok_s / 1e9, name, gpus_p, gpus_d, gpus_p + gpus_d))
    rev = mix_ok[1]
    say("$38 per accelerator-hour: the whole cluster keeping up (TTFT p50 <= 1 s) earns $%.2f at R1 list"
        " prices; $38 is %.0f%% of that (prices %.2fx R1's would give $38)" % (rev, 100 * 38 / rev, 38 / rev))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "seed-claims.txt"), "w") as f:
        f.write("# bench/sim_seed_claims.py (cinfer sim, deterministic: seed 1)\n" + "\n".join(lines) + "\n")
    with open(os.path.join(OUT, "seed-claims.json"), "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
