#!/usr/bin/env python3
"""hf_tokenizers.py - tokenizer.json files of the kinds real Hugging Face models
ship, and the `tokenizers` package's encodings of fixture strings: the oracle
for cinfer's tokenizer.json reader beyond byte-level BPE
(tests/unit/format/test_hf_tokenizers.c).

Needs `tokenizers` (and `sentencepiece` for the charsmap kinds), kept out of the
project venv like the other oracles:
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
  wordpiece_cased BERT cased: BertNormalizer(lowercase false; accents kept)
  wordpiece_cased_strip   lowercase false, strip_accents true
  wordpiece_keep_accents  lowercase true, strip_accents false
  unigram         Unigram with byte fallback, Metaspace("always"): the T5 /
                  ALBERT / XLNet model type, without the precompiled charsmap
  deepseek_v3     byte-level BPE with DeepSeek V3's pre-tokenizer, as in the
                  tokenizer.json of deepseek-ai/DeepSeek-V3: Sequence of three
                  isolating Splits (digit runs of up to 3, Han + kana runs, the
                  word / punctuation / space regex) + ByteLevel without regex,
                  empty normalizer Sequence, TemplateProcessing "<bos> $A"

  unigram_nfkc    Unigram + SentencePiece's precompiled charsmap (nmt_nfkc, from
                  a model the `sentencepiece` package trains) in XLM-R's form:
                  Sequence[Precompiled, Replace(" {2,}", " ")], Metaspace
  unigram_rules   Unigram + a small charsmap built from NORM_RULES (multi-code-
                  point keys: tokenizers' shortest-prefix rule per grapheme), in
                  the newer converters' form: Sequence[Precompiled, Strip(right),
                  Replace(" {2,}", "▁")]
The two charsmap kinds also need `sentencepiece` (same venv).

Kinds may be named on the command line after <out> to write only those.
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

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
DS_CORPUS = CORPUS + [
    "x.append(y); $var = foo->bar(); @decorator #tag [link](url) {key: value}",
    "東京都の人口は1400万人です。カタカナとひらがなと漢字が混ざった文章。",
    "价格是12345678元，电话：010-8888-9999。",
    "e\u0301 combining marks: a\u0300 o\u0308 \u0928\u093f\u0930\u094d Hindi \u0915\u094d\u0937",
    "  indented\r\n\r\n\tcode();;  \n   ",
    "Numbers: 1 22 333 4444 55555 1234567890 ½ ² ٣٤٥ ①②",
] * 10
DS_STRINGS = STRINGS + [
    "x.append(y)", "$HOME/.bashrc", "foo--bar__baz", "1234567", "3.14159e-10", "東京タワーへ行きます", "漢字かなカナ123",
    "中文，标点！", "a\u0300\u0301b", "\u0928\u093f\u0930\u094d\u092e\u0932", "line\r\n\r\n  next",
    "   \t\n", "'s 're 'VE", "½² ٣٤٥ ①", "(\"quoted\")...!?", "<｜begin▁of▁sentence｜>Hi<｜end▁of▁sentence｜>",
    "\U0001F600\U0001F44D\U0001F3FD", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "x\u3040y\u309fz",
]
# deepseek-ai/DeepSeek-V3 tokenizer.json, pre_tokenizer.pretokenizers[0..2].pattern.Regex
DS_V3_SPLITS = [
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]
DS_SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]
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


def wordpiece(lowercase=True, strip_accents=None):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents)
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


CHARSMAP_STRINGS = STRINGS + [
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "①②③ ㍿ ﬁﬂ ™ ½", "e\u0301 A\u0301 a\u0301\u0302 Ａ\u0301 x\u0308\u0301", "Å Å Ω Ω",
    "\u1100\u1161\u11a8 \uac01 \u1100\u1161", "👍🏽 🇯🇵🇫🇷🇩 👩\u200d💻 x\u200dy", "a\u00a0b\u3000c\u2003d  e   f",
    "trailing   \u3000 ", "\u0928\u093f\u0930\u094d\u092e\u0932 \u0915\u094d\u0937", "tab\tnew\nline\r\n",
    "\u0301 leading mark", "ｶﾀｶﾅ ﾊﾟﾋﾟ", "x\ufeffy\u200bz",
]
# sentencepiece normalization rules (source code points -> target), hex
NORM_RULES = [("FF41", "61"), ("FF42", "62"), ("FF43", "63"), ("FF21", "41"), ("2460", "31"), ("FB01", "66 69"),
              ("65 301", "E9"), ("41 301", "C1"), ("61 301", "E1"), ("FF21 301", "C1"), ("3000", "20"),
              ("A0", "20"), ("1100 1161", "AC00"), ("1F44D 1F3FD", "1F44D"), ("200D", ""), ("D55C", "1112 1161 11AB")]


def spm_charsmap(rule):
    """The precompiled_charsmap of a model sentencepiece trains with the given
    normalization rule name or rule list (read from the model protobuf by hand:
    ModelProto field 3 normalizer_spec, its field 2 precompiled_charsmap)."""
    import io
    import tempfile

    import sentencepiece as spm
    kw = {"normalization_rule_name": rule} if isinstance(rule, str) else {}
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
        if not isinstance(rule, str):
            for src, dst in rule:
                f.write(src + "\t" + dst + "\n")
            kw = {"normalization_rule_tsv": f.name}
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=model, vocab_size=100,
                                   model_type="unigram", minloglevel=2, hard_vocab_limit=False, **kw)
    os.unlink(f.name)

    def fields(buf):
        i = 0
        while i < len(buf):
            key, i = varint(buf, i)
            if key & 7 == 0:
                _, i = varint(buf, i)
                yield key >> 3, None
            elif key & 7 == 2:
                n, i = varint(buf, i)
                yield key >> 3, buf[i:i + n]
                i += n
            else:
                i += 4 if key & 7 == 5 else 8
                yield key >> 3, None

    def varint(buf, i):
        v = sh = 0
        while True:
            c = buf[i]
            i += 1
            v |= (c & 0x7F) << sh
            sh += 7
            if c < 0x80:
                return v, i

    spec = next(v for f, v in fields(model.getvalue()) if f == 3)
    return next(v for f, v in fields(spec) if f == 2)


def unigram_charsmap(rule, tail):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(list(spm_charsmap(rule)))] + tail)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator(CORPUS + CHARSMAP_STRINGS * 3, trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tok


def deepseek_v3():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([])
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in DS_V3_SPLITS] +
        [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=DS_SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(DS_CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single=DS_SPECIAL[0] + " $A",
                                                       special_tokens=[(DS_SPECIAL[0], 0)])
    return tok


KINDS = {
    "spm_legacy": lambda: spm_like(normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
                                   None),
    "metaspace_first": lambda: spm_like(None, pre_tokenizers.Metaspace("▁", "first", split=False)),
    "metaspace_split": lambda: spm_like(None, pre_tokenizers.Metaspace("▁", "always", split=True)),
    "wordpiece": wordpiece,
    "wordpiece_cased": lambda: wordpiece(lowercase=False),
    "wordpiece_cased_strip": lambda: wordpiece(lowercase=False, strip_accents=True),
    "wordpiece_keep_accents": lambda: wordpiece(lowercase=True, strip_accents=False),
    "unigram": unigram,
    "deepseek_v3": deepseek_v3,
    "unigram_nfkc": lambda: unigram_charsmap("nmt_nfkc", [normalizers.Replace(Regex(" {2,}"), " ")]),
    "unigram_rules": lambda: unigram_charsmap(NORM_RULES, [normalizers.Strip(left=False, right=True),
                                                           normalizers.Replace(Regex(" {2,}"), "▁")]),
}
BERT_STRINGS = STRINGS + ["ÀÉÎÕÜ àéîõü Çç Ññ", "Straße STRASSE ǅungla", "ÉCOLE école Ecole", "Ωmega ΣΊΣΥΦΟΣ"]
KIND_STRINGS = {"deepseek_v3": DS_STRINGS, "unigram_nfkc": CHARSMAP_STRINGS, "unigram_rules": CHARSMAP_STRINGS, "wordpiece_cased": BERT_STRINGS, "wordpiece_cased_strip": BERT_STRINGS,
                "wordpiece_keep_accents": BERT_STRINGS}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf/tok"
    only = sys.argv[2:]
    for name, make in KINDS.items():
        if only and name not in only:
            continue
        tok = make()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # what cinfer reads
        cases = [{"text": s, "ids": tok.encode(s, add_special_tokens=False).ids,
                  "ids_special": tok.encode(s, add_special_tokens=True).ids}
                 for s in KIND_STRINGS.get(name, STRINGS)]
        with open(os.path.join(d, "tokens.json"), "w") as f:
            json.dump({"vocab_size": tok.get_vocab_size(), "cases": cases}, f, ensure_ascii=False, indent=0)
        print(name, tok.get_vocab_size(), "tokens")


if __name__ == "__main__":
    main()
