#!/usr/bin/env python3
"""prefix_key.py - independent oracle for the prefix-cache block key encoding
(src/engine/prefix_cache.h). Prints the keys test_prefix_cache.c pins:

  key = SHA-256(parent[32] | u32le block_tokens | i32le tokens... |
                fingerprint[32] | u32le salt_len | salt)

Vector: fingerprint = bytes 0..31, block_tokens = 16,
block 0 tokens = [1000*i - 3 for i in 0..15] (the first is negative),
block 1 tokens = [7*i for i in 0..15], salts "" and "tenant-a".
"""
import hashlib
import struct

FP = bytes(range(32))
BT = 16
B0 = [1000 * i - 3 for i in range(BT)]
B1 = [7 * i for i in range(BT)]


def key(parent, tokens, salt):
    m = hashlib.sha256()
    m.update(parent if parent is not None else bytes(32))
    m.update(struct.pack("<I", len(tokens)))
    m.update(struct.pack("<%di" % len(tokens), *tokens))
    m.update(FP)
    m.update(struct.pack("<I", len(salt)))
    m.update(salt)
    return m.digest()


for salt in (b"", b"tenant-a"):
    k0 = key(None, B0, salt)
    k1 = key(k0, B1, salt)
    print("salt %-10r block0 %s" % (salt.decode(), k0.hex()))
    print("salt %-10r block1 %s" % (salt.decode(), k1.hex()))
