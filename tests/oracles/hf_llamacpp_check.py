#!/usr/bin/env python3
"""hf_llamacpp_check.py - `cinfer convert hf` output loads in llama.cpp with the
same logits as transformers: for each tests/data/hf/<model>, converts the
directory, runs llama-eval-callback on the fixture prompt and compares the
last position's printed logits (llama.cpp prints the first and last three to 4
decimals) with logits.json, and llama-tokenize's ids with tokens.json.
    python3 tests/oracles/hf_llamacpp_check.py build/cinfer /work/llama/build/bin [MODEL...]
Prints one line per model and exits 1 on any mismatch. Not run by `make test`."""
import json
import os
import re
import subprocess
import sys
import tempfile

PROMPT = "Once upon a time, the quick brown fox counted 12345!"


def main():
    cinfer, bindir = sys.argv[1], sys.argv[2]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "hf")
    bad = 0
    for m in sys.argv[3:] or ("llama", "qwen2", "mistral", "qwen3"):
        d = os.path.join(root, m)
        ref = json.load(open(os.path.join(d, "logits.json")))
        with tempfile.TemporaryDirectory() as tmp:
            g = os.path.join(tmp, m + ".gguf")
            subprocess.run([cinfer, "convert", "hf", d, g], check=True, capture_output=True)
            log = os.path.join(tmp, "eval.txt")
            for _ in range(5):  # llama.cpp's log thread sometimes loses the tail at exit: retry
                with open(log, "w") as fp:
                    subprocess.run([os.path.join(bindir, "llama-eval-callback"), "-m", g, "-p", PROMPT, "-n", "1", "-ctk", "f32", "-ctv", "f32", "-fa", "off",
                                    "-t", "2"], stdout=fp, stderr=subprocess.STDOUT)
                out = open(log).read()
                if "result_output = " in out and "sum = " in out[out.rindex("result_output = "):]:
                    break
            if "result_output = " not in out:
                sys.exit(f"{m}: llama-eval-callback failed: {out[-400:]}")
            blk = out[out.rindex("result_output = "):]
            row = re.search(r"\[\s*([-0-9.e, ]+),\s*\.\.\.,\s*([-0-9.e, ]+)\]", blk)
            got = [float(x) for x in row.group(1).split(",")] + [float(x) for x in row.group(2).split(",")]
            want = ref["logits"][-1][:3] + ref["logits"][-1][-3:]
            diff = max(abs(a - b) for a, b in zip(got, want))
            tok_ok = True
            for case in json.load(open(os.path.join(d, "tokens.json"))):
                ids = subprocess.run([os.path.join(bindir, "llama-tokenize"), "-m", g, "-p", case["text"], "--ids",
                                      "--no-bos", "--log-disable"], capture_output=True, text=True).stdout
                lines = [ln for ln in ids.strip().splitlines() if ln.startswith("[")]
                if not lines or json.loads(lines[-1]) != case["ids"]:
                    tok_ok = False
                    print(f"{m}: {case['text']!r}: llama.cpp {lines[-1:]} vs tokenizers {case['ids']}")
            # llama.cpp's CPU BF16 matmul rounds activations to BF16: a looser bound there
            ok = diff <= (1e-3 if m in ("qwen2", "qwen3") else 6e-5) and tok_ok
            bad += not ok
            print(f"{m}: llama.cpp last-position logits {got} vs transformers {want}: max |diff| {diff:.2g} "
                  f"(print precision 5e-5); tokenizer ids {'match' if tok_ok else 'DIFFER'}: {'ok' if ok else 'FAIL'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
