#!/usr/bin/env python3
"""hf_tokenizers.py - tokenizer.json files of the kinds real Hugging Face models
ship, and the `tokenizers` package's encodings of fixture strings: the oracle
for cinfer's tokenizer.json reader beyond byte-level BPE
(tests/unit/format/test_hf_tokenizers.c).

Needs only `tokenizers` (kept out of the project venv, like the other oracles):
    /work/venvs/hf/bin/python tests/oracles/hf_tokenizers.py tests/data/hf/tok

Each kind is trained on a fixed corpus with a fixed vocabulary size (training is
deterministic), saved as <out>/<kind>/tokenizer.json, and encoded with and
without special tokens into <out>/<kind>/tokens.json:
  spm_legacy      llama-2 style: BPE with byte fallback (<0x00>..<0xFF> in the
                  vocabulary), normalizer Prepend("▁") + Replace(" ", "▁"),
                  no pre-tokenizer
  metaspace_first BPE with byte fallback, pre-tokenizer Metaspace(prepend_scheme
                  "first", split false), as transformers writes non-legacy llama
  metaspace_split BPE with byte fallback, Metaspace(prepend_scheme "always",
                  split true)
  wordpiece       BERT uncased: BertNormalizer + BertPreTokenizer + WordPiece,
                  [CLS] $A [SEP] post-processor
  unigram         Unigram with byte fallback, Metaspace("always"): the T5 /
                  ALBERT / XLNet model type, without the precompiled charsmap
"""
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 2024 and we've got 12345 tokens!",
    "Hello world, hello tokenizer; numbers 3.14159 and 42 or 1000000.",
    "Once upon a time there was a little model that could count to ten: one two three.",
    "def main():\n    print('hi')\n    return 0\n",
    "Grüße aus München! Ça va? 日本語のテキスト。",
    "unbelievable unbelievably believer believing relief, running runner runs ran.",
] * 20
STRINGS = [
    "Hello world", "", " leading space", "  two  spaces\n\nnew lines\t tab", "trailing  ",
    "It's 2024, isn't it?", "Grüße 日本語 🙂 emoji", "unbelievably running believers",
    "Hello</s>world<s> again", "<s>start with special", "def f(x):\n    return x*1000",
    "UPPER Case MiXeD", "naïve café résumé", "tokenization!!! ??? ...",
]
BYTES = ["<0x%02X>" % b for b in range(256)]


def strip_byte_added(tok):
    """The trainer lists the <0xXX> tokens as added tokens; real llama files
    have them only in the model vocabulary, so they must not match text."""
    j = json.loads(tok.to_str())
    j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] not in BYTES]
    return Tokenizer.from_str(json.dumps(j))


def spm_like(normalizer, pre_tokenizer):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"] + BYTES,
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok = strip_byte_added(tok)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


def wordpiece():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


def unigram():
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tok


KINDS = {
    "spm_legacy": lambda: spm_like(normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
                                   None),
    "metaspace_first": lambda: spm_like(None, pre_tokenizers.Metaspace("▁", "first", split=False)),
    "metaspace_split": lambda: spm_like(None, pre_tokenizers.Metaspace("▁", "always", split=True)),
    "wordpiece": wordpiece,
    "unigram": unigram,
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf/tok"
    for name, make in KINDS.items():
        tok = make()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # what cinfer reads
        cases = [{"text": s, "ids": tok.encode(s, add_special_tokens=False).ids,
                  "ids_special": tok.encode(s, add_special_tokens=True).ids} for s in STRINGS]
        with open(os.path.join(d, "tokens.json"), "w") as f:
            json.dump({"vocab_size": tok.get_vocab_size(), "cases": cases}, f, ensure_ascii=False, indent=0)
        print(name, tok.get_vocab_size(), "tokens")


if __name__ == "__main__":
    main()
