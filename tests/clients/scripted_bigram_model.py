"""scripted_bigram_model.py - TEST-ONLY: writes a tiny llama GGUF whose greedy (and, in
practice, sampled) output replays fixed scripts, so tool-call and reasoning flows can be
tested end to end through the real server, tokenizer, engine and forward pass.

How it works (a bigram model, no special code path in cinfer):
- Vocabulary (SentencePiece "llama" tokenizer): <unk>, <s>, </s>, 256 byte-fallback tokens,
  control tokens <|im_start|> <|im_end|> <|call|> <|answer|> <|think|>, then the script pieces
  as normal tokens ("<tool_call>", '{"name": "get_weather", ', ...).
- One transformer block whose attention and feed-forward weights are all zero, so the
  residual stream at every position is the token's embedding; embeddings are one-hot
  (token t -> unit vector t). The LM head row of token u has weight BIG at column t for every
  t whose successor is u. So the logits depend only on the last token, and each token has one
  successor with a logit gap of ~ BIG * sqrt(dim) (~70): P(any other token) < 1e-25.
- Forced tool calls: FORCED_EDGES continue the server's forced tool-call openers into the call.
- The chat template ends the prompt with <|answer|> when the last message is a tool result,
  <|call|> when tools are offered, else <|think|>; each starts one script below. Every script
  ends with </s> (EOS). The template mentions <tool_call>, so cinfer detects the Hermes parser.
  With enable_thinking (Anthropic thinking, reasoning effort) the prompt ends with
  "<|think|><think>" like Qwen3 / R1-0528 templates: the output then starts inside the reasoning
  block (the server must notice: RECIPE_PARSER_IN_REASONING); with tools too it ends with
  "<|call|><think>" (the model then reasons and answers, no call), where a forced tool call must
  first close the block ("</think>\n\n" before the opener).

Variant write(path, think_loop=True) (tests/clients/test_reasoning_budget.py): the reasoning never
ends on its own, "The user" and " says hello." follow each other forever (THINK_LOOP), while
"</think>" is still followed by the answer; only a reasoning budget (the server forcing
"</think>") or max_tokens ends the block.

Used by tests/clients/test_tool_calls.py (and the reasoning tests). Never shipped: the file is
generated at test time into a temporary directory.
"""
import struct

SCRIPTS = {
    "<|call|>": ["<tool_call>", '{"name": "get_weather", ', '"arguments": ', '{"city": ', '"Paris"', "}}",
                 "</tool_call>"],
    "<|answer|>": ["The", " weather", " in", " Paris", " is", " sunny", "."],
    "<|think|>": ["<think>", "The user", " says hello.", "</think>", "Hello", "!", " How", " can",
                  " I", " help", "?"],
}
# Forced tool calls (tool_choice required / named): the server ends the prompt with the Hermes
# opener "<tool_call>\n" or '<tool_call>\n{"name": "get_weather", "arguments": ' (Llama 3:
# '{"name": "get_weather", "parameters": '). SentencePiece tokenizes the text after a special
# token with a space prefix and these characters as byte tokens, so the openers end with the byte
# token of "\n" (required) or the last byte of "\u2581" (E2 96 81, named); these edges continue
# them into the call script.
FORCED_EDGES = {"<0x0A>": '{"name": "get_weather", ', "<0x81>": '{"city": '}
TOOL_CALL_ARGS = '{"city": "Paris"}'
ANSWER_TEXT = "The weather in Paris is sunny."
REASONING_TEXT = "The user says hello."
THINK_ANSWER_TEXT = "Hello! How can I help?"
THINK_LOOP = {" says hello.": "The user"}  # think_loop: the reasoning's last piece leads back to its first

CONTROL = ["<|im_start|>", "<|im_end|>", "<|call|>", "<|answer|>", "<|think|>"]
USER_DEFINED = ["<tool_call>", "</tool_call>", "<think>", "</think>"]  # added tokens, as in Qwen vocabularies

TEMPLATE = (
    "{%- for m in messages -%}"
    "<|im_start|>{{ m.role }}\n"
    "{%- if m.content %}{{ m.content }}{% endif -%}"
    "{%- if m.tool_calls %}{% for tc in m.tool_calls %}<tool_call>{{ tc.function.name }}</tool_call>"
    "{% endfor %}{% endif -%}"
    "<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{%- if messages[-1].role == 'tool' -%}<|answer|>"
    "{%- elif tools and enable_thinking is defined and enable_thinking -%}<|call|><think>"
    "{%- elif tools -%}<|call|>"
    "{%- elif enable_thinking is defined and enable_thinking -%}<|think|><think>"
    "{%- else -%}<|think|>"
    "{%- endif -%}"
    "{%- endif -%}"
)

DIM = 320
BIG = 4.0


def _vocab():
    tokens, types = ["<unk>", "<s>", "</s>"], [2, 3, 3]
    for b in range(256):
        tokens.append("<0x%02X>" % b)
        types.append(6)
    tokens += CONTROL
    types += [3] * len(CONTROL)
    for start, pieces in SCRIPTS.items():
        for p in pieces:
            sp = p.replace(" ", "\u2581")
            if sp in tokens:
                raise ValueError("piece %r is in two scripts: the bigram chain would be ambiguous" % p)
            tokens.append(sp)
            types.append(4 if p in USER_DEFINED else 1)
    return tokens, types


def _successors(tokens, think_loop=False):
    idx = {t: i for i, t in enumerate(tokens)}
    nxt = {}
    for start, pieces in SCRIPTS.items():
        chain = [start] + [p.replace(" ", "\u2581") for p in pieces] + ["</s>"]
        for a, b in zip(chain, chain[1:]):
            nxt[idx[a]] = idx[b]
    for a, b in FORCED_EDGES.items():
        nxt[idx[a]] = idx[b.replace(" ", "\u2581")]
    if think_loop:
        for a, b in THINK_LOOP.items():
            nxt[idx[a.replace(" ", "\u2581")]] = idx[b.replace(" ", "\u2581")]
    return nxt


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key, typ, val):
    out = _str(key) + struct.pack("<I", typ)
    if typ == 8:
        return out + _str(val)
    if typ == 4 or typ == 5:
        return out + struct.pack("<I" if typ == 4 else "<i", val)
    if typ == 6:
        return out + struct.pack("<f", val)
    if typ == 7:
        return out + struct.pack("<?", val)
    raise ValueError(typ)


def _arr(key, elem, vals):
    out = _str(key) + struct.pack("<IIQ", 9, elem, len(vals))
    if elem == 8:
        return out + b"".join(_str(v) for v in vals)
    if elem == 6:
        return out + struct.pack("<%df" % len(vals), *vals)
    if elem == 5:
        return out + struct.pack("<%di" % len(vals), *vals)
    raise ValueError(elem)


def write(path, think_loop=False):
    """Writes the scripted model to `path` (about 2.6 MB); think_loop: the reasoning loops (THINK_LOOP)."""
    tokens, types = _vocab()
    nv = len(tokens)
    assert nv <= DIM
    nxt = _successors(tokens, think_loop)
    ff = 32
    kvs = [
        _kv("general.architecture", 8, "llama"),
        _kv("general.name", 8, "scripted-bigram-test-model"),
        _kv("general.alignment", 4, 32),
        _kv("llama.context_length", 4, 2048),
        _kv("llama.embedding_length", 4, DIM),
        _kv("llama.block_count", 4, 1),
        _kv("llama.feed_forward_length", 4, ff),
        _kv("llama.attention.head_count", 4, 1),
        _kv("llama.attention.head_count_kv", 4, 1),
        _kv("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
        _kv("tokenizer.ggml.model", 8, "llama"),
        _arr("tokenizer.ggml.tokens", 8, tokens),
        _arr("tokenizer.ggml.scores", 6, [0.0] * nv),
        _arr("tokenizer.ggml.token_type", 5, types),
        _kv("tokenizer.ggml.bos_token_id", 4, 1),
        _kv("tokenizer.ggml.eos_token_id", 4, 2),
        _kv("tokenizer.ggml.unknown_token_id", 4, 0),
        _kv("tokenizer.ggml.add_bos_token", 7, True),
        _kv("tokenizer.chat_template", 8, TEMPLATE),
    ]

    def zeros(n):
        return bytes(4 * n)

    def ones(n):
        return struct.pack("<%df" % n, *([1.0] * n))

    emb = bytearray(4 * DIM * nv)  # ne = [DIM, nv]: row t = one-hot t
    for t in range(nv):
        struct.pack_into("<f", emb, 4 * (t * DIM + t), 1.0)
    out = bytearray(4 * DIM * nv)  # row u: BIG at column t for each t -> u
    for t, u in nxt.items():
        struct.pack_into("<f", out, 4 * (u * DIM + t), BIG)
    tensors = [
        ("token_embd.weight", [DIM, nv], bytes(emb)),
        ("output_norm.weight", [DIM], ones(DIM)),
        ("output.weight", [DIM, nv], bytes(out)),
        ("blk.0.attn_norm.weight", [DIM], ones(DIM)),
        ("blk.0.attn_q.weight", [DIM, DIM], zeros(DIM * DIM)),
        ("blk.0.attn_k.weight", [DIM, DIM], zeros(DIM * DIM)),
        ("blk.0.attn_v.weight", [DIM, DIM], zeros(DIM * DIM)),
        ("blk.0.attn_output.weight", [DIM, DIM], zeros(DIM * DIM)),
        ("blk.0.ffn_norm.weight", [DIM], ones(DIM)),
        ("blk.0.ffn_gate.weight", [DIM, ff], zeros(DIM * ff)),
        ("blk.0.ffn_up.weight", [DIM, ff], zeros(DIM * ff)),
        ("blk.0.ffn_down.weight", [ff, DIM], zeros(DIM * ff)),
    ]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    infos, off = b"", 0
    for name, ne, data in tensors:
        infos += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", 0, off)  # F32
        off += (len(data) + 31) // 32 * 32
    blob = head + infos
    blob += bytes((32 - len(blob) % 32) % 32)
    with open(path, "wb") as f:
        f.write(blob)
        for _, _, data in tensors:
            f.write(data)
            f.write(bytes((32 - len(data) % 32) % 32))
    return path


if __name__ == "__main__":
    import sys
    write(sys.argv[1] if len(sys.argv) > 1 else "scripted-bigram.gguf")
