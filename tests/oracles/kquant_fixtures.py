#!/usr/bin/env python3
"""kquant_fixtures.py - independent oracle for cinfer's dequantization of the
block types Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4
(src/tensor/kquant.c).

Writes tests/data/kquant/<type>.bin for each type: NB random blocks (random
bytes, with the fp16 scale fields replaced by sane values so no block holds
inf/NaN), then the NB * block_elems float32 values that gguf-py's numpy
dequantization (gguf.quants.dequantize) gives for them, all little-endian.
test_dtype.c checks cinfer's dtype_dequantize_row against them bit-exactly.

Usage: python3 -m venv /tmp/ggufenv && /tmp/ggufenv/bin/pip install gguf numpy
       /tmp/ggufenv/bin/python tests/oracles/kquant_fixtures.py [outdir]
Deterministic (fixed seed).
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

# type -> byte offsets of its fp16 fields: (offset, kind) kind "d" signed scale, "m" min
FIELDS = {
    T.Q4_1: [(0, "d"), (2, "min")],
    T.Q5_0: [(0, "d")],
    T.Q5_1: [(0, "d"), (2, "min")],
    T.Q2_K: [(80, "d"), (82, "dmin")],
    T.Q3_K: [(108, "d")],
    T.Q4_K: [(0, "d"), (2, "dmin")],
    T.Q5_K: [(0, "d"), (2, "dmin")],
    T.Q6_K: [(208, "d")],
    T.IQ4_NL: [(0, "d")],
    T.IQ4_XS: [(0, "d")],
    T.MXFP4: [(0, "e8m0")],
}


def make_blocks(rng, qtype, nb):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(nb, block_bytes), dtype=np.uint8)
    for off, kind in FIELDS[qtype]:
        if kind == "e8m0":  # MXFP4's shared exponent byte: 2^(e-128) per block, around 1, one tiny
            raw[:, off] = rng.integers(118, 136, size=nb, dtype=np.uint8)
            raw[0, off] = 1
            continue
        if kind == "dmin":  # K-quant mins are subtracted: non-negative, like real files
            v = rng.uniform(0.0, 0.05, size=nb)
        elif kind == "min":
            v = rng.uniform(-1.0, 0.0, size=nb)
        else:
            v = rng.uniform(-0.1, 0.1, size=nb)
        v[0] = 3.0e-6 if nb > 1 else v[0]  # one fp16 subnormal scale
        raw[:, off:off + 2] = v.astype(np.float16).view(np.uint8).reshape(nb, 2)
    return raw, block_elems


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "kquant")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261201)
    for qtype in FIELDS:
        nb = 4 if GGML_QUANT_SIZES[qtype][0] == 256 else 16
        raw, be = make_blocks(rng, qtype, nb)
        vals = dequantize(raw.reshape(-1), qtype).astype("<f4").reshape(-1)
        assert vals.size == nb * be and np.all(np.isfinite(vals))
        path = os.path.join(out, qtype.name.lower() + ".bin")
        with open(path, "wb") as f:
            f.write(raw.tobytes())
            f.write(vals.tobytes())
        print(path, nb, "blocks", os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
