#!/usr/bin/env python3
"""grammar_compare.py - side-by-side summary of one bench/grammar.sh run from the per-sample files
that bench_grammar (cinfer-samples.tsv) and grammar_peers.py (llguidance-/xgrammar-samples.tsv)
write into the dump directory. The engines' own summaries average over the instances of the
schemas each one compiled, which are different sets; this compares them on the same work:

1. coverage per subset (schemas compiled), side by side;
2. the schemas llguidance compiles and cinfer refuses, counted by the keyword cinfer names;
3. mask time (mean, p50, p99, max) and time to first mask (compile + first mask, p50 and mean)
   over the instances that every engine compiled and fully accepted, so every engine computes
   masks for exactly the same token sequences.

Usage: grammar_compare.py DUMP_DIR   (standard library only)"""
import collections
import os
import sys

ENGINES = ["cinfer", "llguidance", "xgrammar"]


def load(path):
    schemas, tokens, instances = {}, collections.defaultdict(list), {}
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] == "schema":
                schemas[p[1]] = {"subset": p[2], "ok": p[3] == "1", "us": float(p[4]), "keyword": p[5]}
            elif p[0] == "token":
                tokens[p[1]].append(float(p[3]))
            elif p[0] == "instance":
                instances[p[1]] = p[2] == "1"
    return schemas, tokens, instances


def pct(v, q):
    return v[min(len(v) - 1, int(len(v) * q))]


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    runs = {}
    for e in ENGINES:
        path = os.path.join(sys.argv[1], f"{e}-samples.tsv")
        if os.path.exists(path):
            runs[e] = load(path)
    if "cinfer" not in runs:
        print("grammar_compare: no cinfer-samples.tsv in the dump directory", file=sys.stderr)
        return 1
    engines = [e for e in ENGINES if e in runs]
    base = runs["cinfer"][0]
    subsets = list(dict.fromkeys(s["subset"] for s in base.values()))
    print("coverage (schemas compiled per subset): " + " | ".join(engines))
    for sub in subsets + ["total"]:
        ids = [i for i, s in base.items() if sub in ("total", s["subset"])]
        cells = [f"{sum(runs[e][0].get(i, {}).get('ok', False) for i in ids)}/{len(ids)}" for e in engines]
        print(f"  {sub:16s} " + "  ".join(f"{c:>7s}" for c in cells))
    if "llguidance" in runs:
        gaps = collections.Counter()
        names = collections.defaultdict(list)
        for i, s in base.items():
            if not s["ok"] and runs["llguidance"][0].get(i, {}).get("ok"):
                gaps[s["keyword"]] += 1
                names[s["keyword"]].append(i)
        print("schemas llguidance compiles and cinfer refuses, by the keyword cinfer names:")
        for k, n in gaps.most_common():
            print(f"  {k or '(none)':22s} {n}  ({', '.join(names[k])})")
        extra = [i for i, s in base.items() if s["ok"] and not runs["llguidance"][0].get(i, {}).get("ok")]
        print(f"schemas cinfer compiles and llguidance refuses: {len(extra)} {' '.join(extra)}")
    common = [i for i, ok in runs["cinfer"][2].items() if ok and all(runs[e][2].get(i) for e in engines)]
    n_tok = sum(len(runs["cinfer"][1][i]) for i in common)
    print(f"same work: {len(common)} instances every engine compiled and fully accepted, {n_tok} tokens")
    for e in engines:
        v = sorted(t for i in common for t in runs[e][1][i])
        first = sorted(runs[e][0][i.rsplit("#", 1)[0]]["us"] + runs[e][1][i][0] for i in common)
        if not v:
            continue
        print(f"  {e:10s} mask mean={sum(v) / len(v):.1f}us p50={pct(v, 0.5):.1f}us p99={pct(v, 0.99):.1f}us "
              f"max={v[-1]:.1f}us | time-to-first-mask p50={pct(first, 0.5):.1f}us "
              f"mean={sum(first) / len(first):.1f}us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
