#!/usr/bin/env python3
"""grammar_cases.py - a deterministic sample of MaskBench (JSONSchemaBench) cases as JSON lines
for bench_grammar and grammar_peers.py: {"subset", "id", "schema", "instances": [text...]}, the
first N files (sorted by name) of each JSONSchemaBench subset, valid instances only, each
serialized with json.dumps (", " / ": " separators, as MaskBench does).

Usage: grammar_cases.py JSONSCHEMABENCH_CHECKOUT_OR_GIT_DIR [--per-subset N] > cases.jsonl
(the checkout is github.com/guidance-ai/jsonschemabench; a bare git dir is read with git show)."""
import argparse
import json
import os
import subprocess
import sys

SUBSETS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra", "Glaiveai2K",
           "Kubernetes", "Snowplow", "WashingtonPost", "JsonSchemaStore"]


def list_files(root):
    data = os.path.join(root, "maskbench", "data")
    if os.path.isdir(data):
        return sorted(os.listdir(data)), lambda n: open(os.path.join(data, n), "rb").read()
    out = subprocess.run(["git", "-C", root, "ls-tree", "--name-only", "HEAD", "maskbench/data/"], check=True,
                         capture_output=True, text=True).stdout.split()
    names = sorted(os.path.basename(p) for p in out)
    return names, lambda n: subprocess.run(["git", "-C", root, "show", "HEAD:maskbench/data/" + n], check=True,
                                           capture_output=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--per-subset", type=int, default=20)
    a = ap.parse_args()
    names, read = list_files(a.root)
    for subset in SUBSETS:
        picked = [n for n in names if n.startswith(subset + "---")][: a.per_subset]
        for n in picked:
            d = json.loads(read(n))
            inst = [json.dumps(t["data"]) for t in d.get("tests", []) if t.get("valid")]
            print(json.dumps({"subset": subset, "id": n, "schema": d["schema"], "instances": inst}))


if __name__ == "__main__":
    sys.exit(main())
