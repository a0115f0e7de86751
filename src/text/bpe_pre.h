/* bpe_pre.h - the pre-tokenizer regexes of each tokenizer.ggml.pre type
 * (byte-level BPE), as data.
 *
 * Each type is a sequence of PCRE2 patterns (compiled with UTF | UCP) applied
 * one after the other, the way llama.cpp's unicode_regex_split does: every
 * pattern splits each piece left by the previous ones into its matches and
 * the unmatched gaps between them (gaps are kept as pieces too). The pattern
 * strings are the public ones from llama.cpp's llama-vocab.cpp (HF tokenizer
 * configs), kept verbatim except that the long deepseek-llm letter class is
 * spelled with \x{...} escapes: it contains code points (U+2126 OHM SIGN,
 * U+212A KELVIN SIGN, U+1FBE, ...) that editors silently NFC-normalize into
 * other letters, which would change the ranges. Included only by bpe.c. */
#ifndef CINFER_TEXT_BPE_PRE_H
#define CINFER_TEXT_BPE_PRE_H

#define BPE_MAX_RE 6

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS_CI "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_CJK_DS "[一-龥ࠀ-一가-퟿]+"

typedef struct bpe_pre_def {
    const char *names[8]; /* tokenizer.ggml.pre values, NULL-terminated */
    bool ignore_merges; /* a word that is a whole token is emitted as is */
    const char *re[BPE_MAX_RE];
} bpe_pre_def;

/* Entry 0 is the default (unknown or missing pre type). */
static const bpe_pre_def bpe_pre_defs[] = {
    {{"default", NULL}, false, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL}},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", NULL},
     true,
     {RE_CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                         "\\s+(?!\\S)|\\s+",
      NULL}},
    {{"deepseek-llm", NULL},
     false,
     {"[\r\n]",
      "\\s?["
      "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
      "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-"
      "\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-"
      "\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-"
      "\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-"
      "\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
      "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-"
      "\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-"
      "\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}"
      "\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
      "\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}"
      "\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-"
      "\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-"
      "\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}"
      "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RE_CJK_DS, "\\p{N}+"}},
    {{"deepseek-v3", NULL},
     false,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
      NULL}},
    {{"deepseek-coder", NULL}, false, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK_DS, "\\p{N}", NULL}},
    {{"falcon", NULL}, false, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL}},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva", NULL},
     false,
     {"\\p{N}", RE_GPT2, NULL}},
    /* gpt-neox has no own entry in llama.cpp; GPT-NeoX's tokenizer uses the
     * GPT-2 ByteLevel pre-tokenizer, so it shares the GPT-2 regex. */
    {{"gpt-2", "gpt-neox", "mpt", "olmo", "jais", "phi-2", "roberta-bpe", NULL}, false, {RE_GPT2, NULL}},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", NULL},
     false,
     {RE_CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                         "\\s+(?!\\S)|\\s+",
      NULL}},
};

#endif
