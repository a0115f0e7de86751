#!/usr/bin/env python3
"""sim-compare.py LIVE.json SIM.json - the live-validation table of issue 21
(docs/sim.md "Live validation"): TTFT p50/p99, output tok/s and cache hit ratio
of a `cinfer bench serve --out` run and of a `cinfer sim --out` run of the same
workload, live vs sim and their ratio, each checked against the +-20% bound
(TPOT p50 and E2E p50 are shown too, not judged). A hit ratio of 0 on both
sides counts as equal. Exit 0 when every judged metric is within the bound,
3 when one is not, 1 on unreadable input."""
import json
import sys

BOUND = 0.20


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0])
        sys.exit(0 if len(sys.argv) == 2 else 1)
    try:
        with open(sys.argv[1]) as f:
            live = json.load(f)["summary"]
        with open(sys.argv[2]) as f:
            sim = json.load(f)
        rows = [  # name, live, sim, judged
            ("TTFT p50 (ms)", live["ttft_ms"]["p50"], sim["ttft_s"]["p50"] * 1e3, True),
            ("TTFT p99 (ms)", live["ttft_ms"]["p99"], sim["ttft_s"]["p99"] * 1e3, True),
            ("output tok/s", live["output_tok_s"], sim["tokens_per_s"]["output"], True),
            ("hit ratio (%)", live["cache_hit_ratio"] * 100, sim["hit_rate"] * 100, True),
            ("TPOT p50 (ms)", live["tpot_ms"]["p50"], sim["tpot_s"]["p50"] * 1e3, False),
            ("E2E p50 (ms)", live["e2e_ms"]["p50"], sim["e2e_s"]["p50"] * 1e3, False),
        ]
        n_live, n_sim = live["requests_ok"], sim["requests"]["done"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit("sim-compare.py: %s" % e)
    print("%-15s %10s %10s %8s  %s" % ("metric", "live", "sim", "sim/live", "within 20%"))
    ok = n_live == n_sim
    for name, lv, sv, judged in rows:
        if lv == 0 and sv == 0:
            ratio, verdict = "=", "yes (both 0)"
        elif lv == 0:
            ratio, verdict = "inf", "no"
        else:
            r = sv / lv
            ratio, verdict = "%.3f" % r, "yes" if abs(r - 1) <= BOUND else "no"
        if not judged:
            verdict = "(not judged)"
        elif verdict == "no":
            ok = False
        print("%-15s %10.2f %10.2f %8s  %s" % (name, lv, sv, ratio, verdict))
    print("requests       %10d %10d" % (n_live, n_sim))
    print("criterion (TTFT p50/p99, output tok/s, hit ratio within 20%%): %s" % ("met" if ok else "NOT met"))
    sys.exit(0 if ok else 3)


if __name__ == "__main__":
    main()
