/* hf_vocab.c - the tokenizer files of a Hugging Face directory as llama.cpp's
 * tokenizer.ggml.* keys: tokenizer.json (model, vocab, merges, added tokens,
 * pre-tokenizer), tokenizer_config.json (chat template, bos/eos tokens,
 * add_bos_token) and generation_config.json (eos ids, sampling defaults).
 *
 * Byte-level BPE ("BPE" model with a ByteLevel pre-tokenizer, alone with its
 * GPT-2 regex or after isolating Splits whose regexes, compared verbatim, are a
 * sequence cinfer's BPE knows: llama3, qwen2, DeepSeek V3's three; no
 * normalizer (or an empty Sequence), or NFC, which is not applied: input text
 * is taken to be NFC already, as llama.cpp does, so decomposed input can differ
 * from `tokenizers`) is handled here; the pre-tokenizer's regexes decide
 * tokenizer.ggml.pre, a TemplateProcessing post-processor add_bos / add_eos. Byte-fallback / Metaspace BPE, Unigram and WordPiece go
 * to hf_tokmodels.c. Anything else is refused with a one-line error naming
 * tokenizer.json and the field, as are malformed vocabularies and merges.
 * Token ids must cover 0..n-1 without gaps; the table is padded with
 * "[PAD<i>]" (type unused) up to config.json's vocab_size, as llama.cpp does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/hf_internal.h"
#include "format/safetensors.h"

#define ESC(s) st_escape((s), (char[72]){0}, 72)

#define TJ "tokenizer.json"
#define TOK_NORMAL 1
#define TOK_CONTROL 3
#define TOK_USER 4
#define TOK_UNUSED 5

#define LLAMA3_RE                                                              \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| " \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| " \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

void hf_vocab_free(hf_vocab *v) {
    for (int64_t i = 0; v->text && i < v->n; i++) free(v->text[i]);
    free(v->text);
    free(v->type);
    free(v->score);
}

static bool is_type(json_t *o, const char *type) {
    const char *t = json_string_value(json_object_get(o, "type"));
    return t && !strcmp(t, type);
}

static int vocab_set(hf_vocab *v, int64_t id, const char *s, int32_t type, const char *field, cf_err *err) {
    if (id < 0 || id >= v->n)
        return cf_fail(err, TJ ": field %s: id %lld is outside the vocabulary (0..%lld)", field, (long long)id,
                       (long long)v->n - 1);
    if (v->text[id] && strcmp(v->text[id], s))
        return cf_fail(err, TJ ": field %s: id %lld is given to two different tokens", field, (long long)id);
    if (!v->text[id] && !(v->text[id] = strdup(s))) return cf_fail(err, TJ ": out of memory");
    v->type[id] = type;
    return 0;
}

/* DeepSeek V3 (and R1, V3.1/V3.2): three isolating Splits before ByteLevel. The Han and
 * kana class is spelled in UTF-8 escapes: 一-龥 U+3040-U+309F U+30A0-U+30FF. */
#define DEEPSEEK_V3_RE_DIGITS "\\p{N}{1,3}"
#define DEEPSEEK_V3_RE_HAN_KANA "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+"
#define DEEPSEEK_V3_RE_WORDS                                                                            \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| " \
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"

#define MAX_SPLITS 3

/* The Split regexes cinfer's BPE knows (text/bpe_pre.h), as tokenizer.json spells them. */
typedef struct known_pre {
    const char *name; /* tokenizer.ggml.pre */
    size_t n;
    const char *re[MAX_SPLITS];
} known_pre;

static const known_pre KNOWN_PRE[] = {
    {"llama-bpe", 1, {LLAMA3_RE}},
    {"qwen2", 1, {QWEN2_RE}},
    {"deepseek-v3", 3, {DEEPSEEK_V3_RE_DIGITS, DEEPSEEK_V3_RE_HAN_KANA, DEEPSEEK_V3_RE_WORDS}},
};

/* pretokenizers[i] is Split(Regex, Isolated, not inverted): its regex, or NULL (error set). */
static const char *split_regex(json_t *split, size_t i, cf_err *err) {
    const char *re = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
    if (!is_type(split, "Split") || !re)
        return cf_fail(err, TJ ": field pre_tokenizer.pretokenizers[%zu]: only Split(Regex) may precede ByteLevel", i),
               NULL;
    const char *beh = json_string_value(json_object_get(split, "behavior"));
    if (!beh || strcmp(beh, "Isolated") || json_is_true(json_object_get(split, "invert")))
        return cf_fail(err, TJ ": field pre_tokenizer.pretokenizers[%zu].behavior: only Isolated, not inverted", i),
               NULL;
    return re;
}

/* Sequence [Split(Regex)..., ByteLevel(use_regex false)]: the known pre type of the regexes. */
static const char *split_sequence_name(json_t *list, cf_err *err) {
    size_t n = json_array_size(list);
    json_t *bl = json_array_get(list, n ? n - 1 : 0);
    if (n < 2 || n > MAX_SPLITS + 1 || !is_type(bl, "ByteLevel"))
        return cf_fail(err, TJ ": field pre_tokenizer: only ByteLevel, or 1-3 Split + ByteLevel, is supported"), NULL;
    if (json_is_true(json_object_get(bl, "use_regex")))
        return cf_fail(err,
                       TJ ": field pre_tokenizer.pretokenizers[%zu].use_regex: ByteLevel after Split must not "
                          "split again",
                       n - 1),
               NULL;
    const char *re[MAX_SPLITS];
    for (size_t i = 0; i + 1 < n; i++)
        if (!(re[i] = split_regex(json_array_get(list, i), i, err))) return NULL;
    for (size_t k = 0; k < sizeof KNOWN_PRE / sizeof KNOWN_PRE[0]; k++) {
        bool same = KNOWN_PRE[k].n == n - 1;
        for (size_t i = 0; same && i + 1 < n; i++) same = !strcmp(re[i], KNOWN_PRE[k].re[i]);
        if (same) return KNOWN_PRE[k].name;
    }
    return cf_fail(err, TJ ": field pre_tokenizer.pretokenizers: Split regexes cinfer's BPE does not know (known: "
                           "llama3, qwen2, deepseek-v3)"),
           NULL;
}

/* Byte-level BPE with a pre-tokenizer we know: returns the GGUF pre name. */
static const char *pre_name(json_t *pre, cf_err *err) {
    if (is_type(pre, "ByteLevel")) {
        if (json_is_false(json_object_get(pre, "use_regex")))
            return cf_fail(err, TJ ": field pre_tokenizer: ByteLevel without a regex is not supported"), NULL;
        return "gpt-2";
    }
    if (!is_type(pre, "Sequence"))
        return cf_fail(err, TJ ": field pre_tokenizer: only ByteLevel, or Split + ByteLevel, is supported"), NULL;
    return split_sequence_name(json_object_get(pre, "pretokenizers"), err);
}

/* A tokenizer.json number as the `tokenizers` package sees it: serde_json (without its
 * float_roundtrip feature) parses "d.ddd" as the integer of its digits converted to f64,
 * then divided (or multiplied) by the f64 power of ten: two roundings, so a value can be
 * one ulp off the correctly rounded one jansson gives. Unigram's Viterbi breaks near-ties on
 * such bits. The file's text is taken to be the shortest round-trip spelling (what serde_json
 * and Python write), regenerated here from the double. */
static bool spells(double d, int prec, char *buf, size_t cap) {
    snprintf(buf, cap, "%.*e", prec - 1, d);
    return strtod(buf, NULL) == d;
}

static double serde_json_f64(double d) {
    if (!(d == d) || d == 0 || d > 1e300 || d < -1e300) return d;
    char buf[40];
    int lo = 1, hi = 17; /* shortest round-trip digit count, usually 16 or 17 */
    if (!spells(d, 16, buf, sizeof buf)) lo = 17;
    else if (!spells(d, 15, buf, sizeof buf)) lo = hi = 16;
    else hi = 15;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (spells(d, mid, buf, sizeof buf)) hi = mid;
        else lo = mid + 1;
    }
    spells(d, lo, buf, sizeof buf);
    uint64_t sig = 0;
    int ndig = 0;
    const char *p = buf + (buf[0] == '-');
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') sig = sig * 10 + (uint64_t)(*p - '0'), ndig++;
    int exp = (*p == 'e' ? atoi(p + 1) : 0) - (ndig - 1);
    if (sig <= (1ull << 53) && exp >= -22 && exp <= 22) return d; /* one exact rounding: d itself */
    double f = (double)sig;
    while (exp < -308) f /= 1e308, exp += 308;
    snprintf(buf, sizeof buf, "1e%d", exp < 0 ? -exp : exp);
    double pow10 = strtod(buf, NULL);
    f = exp < 0 ? f / pow10 : f * pow10;
    return d < 0 ? -f : f;
}

/* The id of each model.vocab entry: a {text: id} object, or Unigram's [[text, score], ...]
 * list where the index is the id (its scores go to v->score). */
static int model_ids_max(json_t *map, int64_t *max, cf_err *err) {
    const char *k;
    json_t *id;
    size_t i;
    if (json_is_array(map)) {
        json_array_foreach(
            map, i, id) if (json_array_size(id) != 2 || !json_is_string(json_array_get(id, 0)) ||
                            !json_is_number(json_array_get(
                                id, 1))) return cf_fail(err, TJ ": field model.vocab[%zu]: not a [piece, score] pair",
                                                        i);
        *max = (int64_t)json_array_size(map) - 1;
        return 0;
    }
    if (!json_is_object(map)) return cf_fail(err, TJ ": field model.vocab: missing or not an object");
    json_object_foreach(map, k, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX)
            return cf_fail(err, TJ ": field model.vocab: token ids must be integers 0..2^31-2");
        if (json_integer_value(id) > *max) *max = json_integer_value(id);
    }
    return 0;
}

static int model_ids_set(json_t *map, hf_vocab *v, cf_err *err) {
    const char *k;
    json_t *id;
    size_t i;
    if (json_is_object(map)) {
        json_object_foreach(map, k,
                            id) if (vocab_set(v, json_integer_value(id), k, TOK_NORMAL, "model.vocab", err)) return -1;
        return 0;
    }
    if (!(v->score = calloc((size_t)(v->n ? v->n : 1), sizeof *v->score))) return cf_fail(err, TJ ": out of memory");
    json_array_foreach(map, i, id) {
        double sc = json_number_value(json_array_get(id, 1));
        if (!(sc > -1e30 && sc < 1e30)) return cf_fail(err, TJ ": field model.vocab[%zu]: score out of range", i);
        v->score[i] = serde_json_f64(sc);
        if (vocab_set(v, (int64_t)i, json_string_value(json_array_get(id, 0)), TOK_NORMAL, "model.vocab", err))
            return -1;
    }
    return 0;
}

int hf_vocab_collect(json_t *map, json_t *added, hf_vocab *v, cf_err *err) {
    int64_t max = -1;
    if (model_ids_max(map, &max, err)) return -1;
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) {
        json_t *aid = json_object_get(a, "id");
        if (!json_is_integer(aid) || !json_is_string(json_object_get(a, "content")) || json_integer_value(aid) < 0 ||
            json_integer_value(aid) >= INT32_MAX)
            return cf_fail(err, TJ ": field added_tokens[%zu]: needs an integer id and a string content", i);
        if (json_integer_value(aid) > max) max = json_integer_value(aid);
    }
    /* ids index an array: at most 2^20 unused ids in all (a gap-free vocabulary has none), so a
     * hostile id cannot make the reader allocate gigabytes */
    size_t n_given = (json_is_array(map) ? json_array_size(map) : json_object_size(map)) + json_array_size(added);
    if ((uint64_t)max + 1 > (uint64_t)n_given + (1u << 20))
        return cf_fail(err, TJ ": field model.vocab: token id %lld leaves more than 2^20 ids unused (%zu tokens given)",
                       (long long)max, n_given);
    v->n = max + 1;
    v->text = calloc((size_t)(v->n ? v->n : 1), sizeof *v->text);
    v->type = calloc((size_t)(v->n ? v->n : 1), sizeof *v->type);
    if (!v->text || !v->type) return cf_fail(err, TJ ": out of memory");
    if (model_ids_set(map, v, err)) return -1;
    json_array_foreach(added, i, a) {
        bool special = json_is_true(json_object_get(a, "special"));
        if (vocab_set(v, json_integer_value(json_object_get(a, "id")), json_string_value(json_object_get(a, "content")),
                      special ? TOK_CONTROL : TOK_USER, "added_tokens", err))
            return -1;
    }
    for (int64_t t = 0; t < v->n; t++)
        if (!v->text[t]) return cf_fail(err, TJ ": field model.vocab: no token has id %lld", (long long)t);
    return 0;
}

/* merges: "a b" strings or [a, b] pairs -> "a b" */
int hf_merges_write(json_t *model, gguf_writer *w, cf_err *err) {
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges)) return cf_fail(err, TJ ": field model.merges: missing or not an array");
    size_t n = json_array_size(merges);
    char **out = calloc(n ? n : 1, sizeof *out);
    if (!out) return cf_fail(err, TJ ": out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *m = json_array_get(merges, i);
        const char *s = json_string_value(m);
        if (s) {
            const char *sp = strchr(s, ' ');
            if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' '))
                rc = cf_fail(err, TJ ": field model.merges[%zu]: not two tokens separated by one space", i);
            else out[i] = strdup(s);
        } else if (json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            const char *l = json_string_value(json_array_get(m, 0)), *r = json_string_value(json_array_get(m, 1));
            if (!*l || !*r || strchr(l, ' ') || strchr(r, ' '))
                rc = cf_fail(err, TJ ": field model.merges[%zu]: empty token or token with a space", i);
            else if ((out[i] = malloc(strlen(l) + strlen(r) + 2))) sprintf(out[i], "%s %s", l, r);
        } else {
            rc = cf_fail(err, TJ ": field model.merges[%zu]: not a string or a pair of strings", i);
        }
        if (!rc && !out[i]) rc = cf_fail(err, TJ ": out of memory");
    }
    if (!rc) gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)out, n);
    for (size_t i = 0; i < n; i++) free(out[i]);
    free(out);
    return rc;
}

int hf_vocab_write(const hf_vocab *v, int64_t vocab_size, gguf_writer *w, cf_err *err) {
    if (v->n > vocab_size)
        return cf_fail(err, TJ ": %lld tokens, more than config.json's vocab_size %lld", (long long)v->n,
                       (long long)vocab_size);
    char **text = calloc((size_t)vocab_size, sizeof *text);
    int32_t *type = calloc((size_t)vocab_size, sizeof *type);
    int rc = text && type ? 0 : cf_fail(err, TJ ": out of memory");
    for (int64_t i = 0; !rc && i < vocab_size; i++) {
        if (i < v->n) {
            text[i] = v->text[i];
            type[i] = v->type[i];
            continue;
        }
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
        if (!(text[i] = strdup(pad))) rc = cf_fail(err, TJ ": out of memory");
        type[i] = TOK_UNUSED;
    }
    float *score = v->score && !rc ? calloc((size_t)vocab_size, sizeof *score) : NULL;
    if (v->score && !rc && !score) rc = cf_fail(err, TJ ": out of memory");
    for (int64_t i = 0; score && i < vocab_size; i++) score[i] = i < v->n ? (float)v->score[i] : 0.0f;
    if (score) gguf_set_arr_f32(w, "tokenizer.ggml.scores", score, (uint64_t)vocab_size);
    free(score);
    if (!rc) {
        gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)text, (uint64_t)vocab_size);
        gguf_set_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)vocab_size);
    }
    for (int64_t i = v->n; text && i < vocab_size; i++) free(text[i]);
    free(text);
    free(type);
    return rc;
}

/* Byte-level BPE (the GPT-2 family): tokenizer.ggml.model "gpt2". */
static int byte_level_bpe(json_t *tj, json_t *model, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err) {
    json_t *norm = json_object_get(tj, "normalizer");
    const char *pre, *nt = json_string_value(json_object_get(norm, "type"));
    /* NFC (Qwen2's files): text is taken as already composed, as llama.cpp does; DeepSeek V3
     * writes "no normalizer" as an empty Sequence */
    bool none = !norm || json_is_null(norm) ||
                (nt && !strcmp(nt, "Sequence") && json_is_array(json_object_get(norm, "normalizers")) &&
                 json_array_size(json_object_get(norm, "normalizers")) == 0);
    if (!none && !(nt && !strcmp(nt, "NFC")))
        return cf_fail(err, TJ ": field normalizer: byte-level BPE takes no normalizer but NFC");
    if (!(pre = pre_name(json_object_get(tj, "pre_tokenizer"), err)) ||
        hf_vocab_collect(json_object_get(model, "vocab"), json_object_get(tj, "added_tokens"), v, err) ||
        hf_merges_write(model, w, err) || hf_vocab_write(v, vocab_size, w, err))
        return -1;
    /* a TemplateProcessing post-processor (DeepSeek V3: "<bos> $A") decides add_bos / add_eos;
     * ByteLevel / Sequence ones (llama3) leave it to tokenizer_config.json */
    if (is_type(json_object_get(tj, "post_processor"), "TemplateProcessing") && hf_tok_write_post(tj, v, false, w, err))
        return -1;
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_str(w, "tokenizer.ggml.pre", pre);
    if (json_is_true(json_object_get(model, "ignore_merges"))) gguf_set_bool(w, "tokenizer.ggml.ignore_merges", 1);
    return 0;
}

/* Dispatch on model.type: BPE is byte-level or SentencePiece-style (byte fallback, or a
 * metaspace pre-tokenizer / normalizer); Unigram and WordPiece live in hf_tokmodels.c. */
static int tokenizer_from_json(json_t *tj, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err) {
    json_t *model = json_object_get(tj, "model");
    const char *mt = json_string_value(json_object_get(model, "type"));
    if (!mt) return cf_fail(err, TJ ": field model.type: missing or not a string");
    if (!strcmp(mt, "BPE"))
        return hf_tok_is_metaspace(tj) ? hf_tok_spm_bpe(tj, vocab_size, w, v, err)
                                       : byte_level_bpe(tj, model, vocab_size, w, v, err);
    if (!strcmp(mt, "WordPiece")) return hf_tok_wordpiece(tj, vocab_size, w, v, err);
    if (!strcmp(mt, "Unigram")) return hf_tok_unigram(tj, vocab_size, w, v, err);
    return cf_fail(err, TJ ": field model.type: '%s' is not supported (BPE, Unigram or WordPiece)", ESC(mt));
}

static int read_tokenizer_json(const char *dir, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err) {
    json_t *tj;
    if (hf_json_load(dir, TJ, true, &tj, err)) return -1;
    int rc = tokenizer_from_json(tj, vocab_size, w, v, err);
    json_decref(tj);
    return rc;
}

int hf_tokenizer_json_read(const char *text, size_t n, int64_t vocab_size, gguf_writer *w, cf_err *err) {
    json_error_t je;
    json_t *tj = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!tj) return cf_fail(err, TJ ": %s (line %d)", st_escape(je.text, (char[200]){0}, 200), je.line);
    hf_vocab v = {0};
    int rc =
        json_is_object(tj) ? tokenizer_from_json(tj, vocab_size, w, &v, err) : cf_fail(err, TJ ": not a JSON object");
    hf_vocab_free(&v);
    json_decref(tj);
    return rc;
}

static int64_t find_token(const hf_vocab *v, const char *s) {
    for (int64_t i = 0; i < v->n; i++)
        if (!strcmp(v->text[i], s)) return i;
    return -1;
}

/* bos_token / eos_token: a string or {"content": ...} naming a token. */
static int special_id(json_t *cfg, const char *field, const hf_vocab *v, const char *key, gguf_writer *w, cf_err *err) {
    json_t *t = json_object_get(cfg, field);
    if (json_is_object(t)) t = json_object_get(t, "content");
    if (!t || json_is_null(t)) return 0;
    if (!json_is_string(t)) return cf_fail(err, "tokenizer_config.json: field %s: not a string", field);
    int64_t id = find_token(v, json_string_value(t));
    if (id < 0)
        return cf_fail(err, "tokenizer_config.json: field %s: '%s' is not in the vocabulary", field,
                       ESC(json_string_value(t)));
    gguf_set_u32(w, key, (uint32_t)id);
    return 0;
}

static int read_tokenizer_config(const char *dir, const hf_vocab *v, gguf_writer *w, cf_err *err) {
    json_t *c;
    if (hf_json_load(dir, "tokenizer_config.json", false, &c, err)) return -1;
    if (!c) return 0;
    int rc = -1;
    json_t *tmpl = json_object_get(c, "chat_template");
    if (json_is_array(tmpl)) { /* [{"name": "default", "template": ...}, ...] */
        size_t i;
        json_t *e, *found = NULL;
        json_array_foreach(tmpl, i, e) if (!strcmp(json_string_value(json_object_get(e, "name")) ?: "", "default"))
            found = json_object_get(e, "template");
        tmpl = found;
    }
    if (tmpl && !json_is_string(tmpl)) {
        cf_fail(err, "tokenizer_config.json: field chat_template: not a string");
    } else if (!special_id(c, "bos_token", v, "tokenizer.ggml.bos_token_id", w, err) &&
               !special_id(c, "eos_token", v, "tokenizer.ggml.eos_token_id", w, err) &&
               !special_id(c, "pad_token", v, "tokenizer.ggml.padding_token_id", w, err) &&
               !special_id(c, "unk_token", v, "tokenizer.ggml.unknown_token_id", w, err)) {
        if (tmpl) gguf_set_str(w, "tokenizer.chat_template", json_string_value(tmpl));
        json_t *ab = json_object_get(c, "add_bos_token");
        if (json_is_boolean(ab)) gguf_set_bool(w, "tokenizer.ggml.add_bos_token", json_is_true(ab));
        json_t *ae = json_object_get(c, "add_eos_token");
        if (json_is_boolean(ae)) gguf_set_bool(w, "tokenizer.ggml.add_eos_token", json_is_true(ae));
        rc = 0;
    }
    json_decref(c);
    return rc;
}

/* eos_token_id: an int or a list (the first is the EOS; a second becomes EOT; every one
 * ends generation: tokenizer.hf.eos_token_ids); temperature / top_p / top_k / min_p /
 * repetition_penalty as llama.cpp's general.sampling.* keys (serve applies them). */
static int write_eos_list(json_t *eos, const hf_vocab *v, gguf_writer *w, cf_err *err) {
    size_t n = json_array_size(eos), i;
    if (n > 1024) return cf_fail(err, "generation_config.json: field eos_token_id: more than 1024 ids");
    int32_t ids[1024];
    json_t *e;
    json_array_foreach(eos, i, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= v->n)
            return cf_fail(err, "generation_config.json: field eos_token_id[%zu]: not a token id of the vocabulary", i);
        ids[i] = (int32_t)json_integer_value(e);
    }
    gguf_set_arr_i32(w, "tokenizer.hf.eos_token_ids", ids, n);
    return 0;
}

static int read_generation_config(const char *dir, const hf_vocab *v, gguf_writer *w, cf_err *err) {
    json_t *g;
    if (hf_json_load(dir, "generation_config.json", false, &g, err)) return -1;
    if (!g) return 0;
    const char *file = "generation_config.json";
    int rc = 0;
    json_t *eos = json_object_get(g, "eos_token_id");
    json_t *ids[2] = {json_is_array(eos) ? json_array_get(eos, 0) : eos,
                      json_is_array(eos) ? json_array_get(eos, 1) : NULL};
    const char *keys[2] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"};
    for (int i = 0; i < 2 && !rc; i++) {
        if (!ids[i] || json_is_null(ids[i])) continue;
        if (!json_is_integer(ids[i]) || json_integer_value(ids[i]) < 0 || json_integer_value(ids[i]) >= v->n)
            rc = cf_fail(err, "%s: field eos_token_id: not a token id of the vocabulary", file);
        else gguf_set_u32(w, keys[i], (uint32_t)json_integer_value(ids[i]));
    }
    if (!rc && json_array_size(eos) > 2) rc = write_eos_list(eos, v, w, err);
    double temp, top_p, min_p, rep;
    int64_t top_k;
    int r;
    if (!rc && (r = hf_json_num(g, file, "temperature", &temp, err)) <= 0)
        rc = r < 0 ? -1 : (gguf_set_f32(w, "general.sampling.temp", (float)temp), 0);
    if (!rc && (r = hf_json_num(g, file, "top_p", &top_p, err)) <= 0)
        rc = r < 0 ? -1 : (gguf_set_f32(w, "general.sampling.top_p", (float)top_p), 0);
    if (!rc && (r = hf_json_int(g, file, "top_k", &top_k, err)) <= 0)
        rc = r < 0 ? -1 : (gguf_set_i32(w, "general.sampling.top_k", (int32_t)top_k), 0);
    if (!rc && (r = hf_json_num(g, file, "min_p", &min_p, err)) <= 0)
        rc = r < 0 ? -1 : (gguf_set_f32(w, "general.sampling.min_p", (float)min_p), 0);
    if (!rc && (r = hf_json_num(g, file, "repetition_penalty", &rep, err)) <= 0)
        rc = r < 0 ? -1 : (gguf_set_f32(w, "general.sampling.penalty_repeat", (float)rep), 0);
    json_decref(g);
    return rc;
}

int hf_vocab_read(const char *dir, int64_t vocab_size, gguf_writer *w, cf_err *err) {
    hf_vocab v = {0};
    int rc = read_tokenizer_json(dir, vocab_size, w, &v, err) || read_tokenizer_config(dir, &v, w, err) ||
                     read_generation_config(dir, &v, w, err)
                 ? -1
                 : 0;
    hf_vocab_free(&v);
    return rc;
}
