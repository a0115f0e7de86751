#!/usr/bin/env python3
"""grammar_peers.py - the MaskBench measurement of bench_grammar.c for the peer engines llguidance
and xgrammar (PyPI; installed in their own venv by bench/grammar.sh), on exactly the same
vocabulary and token sequences: bench_grammar --dump DIR writes DIR/vocab.txt (per token: special
flag, hex bytes) and DIR/tokens.jsonl (per instance: the token ids of its text). Single thread
(RAYON_NUM_THREADS=1, xgrammar max_threads=1). For each schema: compile (timed); for each
instance: per token, fill the mask (timed), check the token is allowed, consume it. Also writes
DIR/ENGINE-samples.tsv (per schema, token and instance) for bench/grammar_compare.py.

Usage: grammar_peers.py --dump DIR --cases cases.jsonl --engine llguidance|xgrammar"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")


def load_vocab(path):
    tokens, special = [], []
    with open(path) as f:
        for line in f:
            flag, _, hexbytes = line.rstrip("\n").partition(" ")
            tokens.append(bytes.fromhex(hexbytes))
            special.append(flag == "1")
    return tokens, special


class RawTokenizer:
    """The byte vocabulary as llguidance's TokenizerWrapper wants it; __call__ (used by llguidance
    only for literal strings in grammars) tokenizes greedily by longest match."""

    def __init__(self, tokens, special, eos):
        self.tokens = tokens
        self.eos_token_id = eos
        self.bos_token_id = None
        self.special_token_ids = [i for i, s in enumerate(special) if s]
        self.lookup = {}
        for i, t in enumerate(tokens):
            if t and not special[i] and t not in self.lookup:
                self.lookup[t] = i
        self.maxlen = max(len(t) for t in tokens)

    def __call__(self, s):
        if isinstance(s, str):
            s = s.encode("utf-8")
        out, i = [], 0
        while i < len(s):
            for n in range(min(self.maxlen, len(s) - i), 0, -1):
                t = self.lookup.get(s[i:i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                raise ValueError("byte not in vocabulary")
        return out


class Llg:
    name = "llguidance"

    def __init__(self, tokens, special, eos):
        import llguidance
        import llguidance.numpy as lnp
        self.llg, self.lnp = llguidance, lnp
        self.tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(RawTokenizer(tokens, special, eos[0])),
                                          n_vocab=len(tokens), eos_token=eos)
        self.mask = lnp.allocate_token_bitmask(1, len(tokens))

    def compile(self, schema):
        grammar = self.llg.LLMatcher.grammar_from_json_schema(json.dumps(schema))
        m = self.llg.LLMatcher(self.tok, grammar)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def matcher(self, compiled):
        return compiled.deep_copy()

    def fill(self, m):
        self.lnp.fill_next_token_bitmask(m, self.mask, 0)

    def allowed(self, t):
        return (int(self.mask[0, t // 32]) >> (t % 32)) & 1

    def consume(self, m, t):
        return m.consume_token(t)


class Xgr:
    name = "xgrammar"

    def __init__(self, tokens, special, eos):
        import xgrammar as xgr
        self.xgr = xgr
        info = xgr.TokenizerInfo(tokens, vocab_type=xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=eos)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.mask = xgr.allocate_token_bitmask(1, len(tokens))

    def compile(self, schema):
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.mask)

    def allowed(self, t):
        return (int(self.mask[0, t // 32]) >> (t % 32)) & 1

    def consume(self, m, t):
        return m.accept_token(t)


def stats(name, v):
    if not v:
        print(f"  {name:22s} (none)")
        return
    v = sorted(v)
    n = len(v)
    print(f"  {name:22s} n={n} mean={sum(v) / n:.1f}us p50={v[n // 2]:.1f}us p99={v[int(n * 0.99)]:.1f}us "
          f"max={v[-1]:.1f}us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--engine", required=True, choices=["llguidance", "xgrammar"])
    ap.add_argument("--eos", default="", help="comma-separated EOS ids (default: the first special token)")
    ap.add_argument("--clock", default="cpu", choices=["cpu", "wall"],
                    help="time in this thread's CPU time (default; load-proof) or wall time")
    a = ap.parse_args()
    now = time.thread_time_ns if a.clock == "cpu" else time.perf_counter_ns
    tokens, special = load_vocab(os.path.join(a.dump, "vocab.txt"))
    eos = [int(x) for x in a.eos.split(",") if x] or [special.index(True)]
    seqs = {}
    with open(os.path.join(a.dump, "tokens.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            seqs[d["id"]] = d["tokens"]
    eng = (Llg if a.engine == "llguidance" else Xgr)(tokens, special, eos)
    subsets, mask_us, compile_us, ttfm_us = {}, [], [], []
    samples = open(os.path.join(a.dump, f"{a.engine}-samples.tsv"), "w")  # for grammar_compare.py
    instances = instances_ok = ntok = rejected = 0
    with open(a.cases) as f:
        for line in f:
            c = json.loads(line)
            st = subsets.setdefault(c["subset"], [0, 0])
            st[1] += 1
            t0 = now()
            try:
                compiled = eng.compile(c["schema"])
            except Exception:
                samples.write(f"schema\t{c['id']}\t{c['subset']}\t0\t0\t\n")
                continue
            cu = (now() - t0) / 1e3
            samples.write(f"schema\t{c['id']}\t{c['subset']}\t1\t{cu:.3f}\t\n")
            st[0] += 1
            compile_us.append(cu)
            for i in range(len(c["instances"])):
                ids = seqs.get(f"{c['id']}#{i}")
                if ids is None:
                    continue
                instances += 1
                m = eng.matcher(compiled)
                ok = True
                for k, t in enumerate(ids):
                    t0 = now()
                    eng.fill(m)
                    dt = (now() - t0) / 1e3
                    mask_us.append(dt)
                    samples.write(f"token\t{c['id']}#{i}\t{k}\t{dt:.3f}\n")
                    if k == 0:
                        ttfm_us.append(cu + dt)
                    ntok += 1
                    if not eng.allowed(t) or not eng.consume(m, t):
                        rejected += 1
                        ok = False
                        break
                instances_ok += ok
                samples.write(f"instance\t{c['id']}#{i}\t{int(ok)}\n")
    samples.close()
    print(f"engine={eng.name} n_vocab={len(tokens)} clock={a.clock}")
    for name, (comp, tot) in subsets.items():
        print(f"  subset {name:16s} compiled {comp}/{tot}")
    print(f"  instances {instances} (fully accepted {instances_ok}), tokens {ntok}, rejected tokens {rejected}")
    stats("mask", mask_us)
    stats("compile", compile_us)
    stats("time-to-first-mask", ttfm_us)


if __name__ == "__main__":
    sys.exit(main())
