/* tokenizer.c - loading a tokenizer from GGUF `tokenizer.ggml.*` keys,
 * special-token partitioning, encode dispatch and token -> bytes.
 *
 * Load validates everything it keeps: token/score/type counts agree, scores
 * are finite, types are 0..6, token texts are NUL-free valid UTF-8, BYTE
 * tokens read "<0xXX>". Special ids outside [0, n_vocab) (converters write
 * 4294967295 for "none") are ignored, keeping the default (as llama.cpp).
 * The algorithm-specific encoders live in spm.c, bpe.c and wpm.c; the
 * streaming detokenizer in detok.c. Per-algorithm defaults follow
 * llama.cpp: llama (bos 1, eos 2, unk 0, add_bos, space prefix), gpt2 (bos =
 * eos = 11 when in range, no unk, no add_bos, no space prefix), bert ([CLS]
 * 101 as bos, unk 100, [SEP] 102 appended with add_special, pad 0). See tok_internal.h for the object. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/utf8.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"

/* ---------------------------------------------------------------- helpers */

int tok_idvec_reserve(tok_idvec *v, size_t extra) {
    if (v->n + extra <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 16;
    while (cap < v->n + extra) cap *= 2;
    int32_t *p = realloc(v->v, cap * sizeof *p);
    if (!p) return -1;
    v->v = p;
    v->cap = cap;
    return 0;
}

int tok_idvec_push(tok_idvec *v, int32_t id) {
    if (v->n == v->cap && tok_idvec_reserve(v, 1) != 0) return -1;
    v->v[v->n++] = id;
    return 0;
}

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

int32_t tok_lookup(const tokenizer *t, const char *s, size_t len) {
    size_t i = (size_t)hash_bytes(s, len) & t->hmask;
    for (;;) {
        int32_t id = t->hslots[i];
        if (id < 0) return -1;
        const tok_token *k = &t->tokens[id];
        if (k->len == len && memcmp(k->text, s, len) == 0) return id;
        i = (i + 1) & t->hmask;
    }
}

int32_t tok_byte_fallback(const tokenizer *t, unsigned char b) { return t->byte_tok[b] >= 0 ? t->byte_tok[b] : t->unk; }

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The byte of a "<0xXX>" text, or -1. */
static int parse_byte_token(const char *s, size_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* ------------------------------------------------------------------- load */

static int load_model_name(const gguf_file *f, tok_algo *algo, cf_err *err) {
    gguf_str m;
    int rc = gguf_get_str(f, KEY_MODEL, &m, err);
    if (rc < 0) return -1;
    if (rc > 0) return cf_fail(err, "%s: no tokenizer (key %s missing)", gguf_path(f), KEY_MODEL);
    static const struct {
        const char *name;
        tok_algo algo;
    } algos[] = {{"llama", TOK_ALGO_SPM}, {"gpt2", TOK_ALGO_BPE}, {"bert", TOK_ALGO_WPM}, {"t5", TOK_ALGO_UGM}};
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
        if (!strcmp(m.s, algos[i].name)) {
            *algo = algos[i].algo;
            return 0;
        }
    static const char *const known[] = {"rwkv", "none", "no_vocab"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(m.s, known[i]))
            return cf_fail(err, "%s: tokenizer model '%s' is not supported yet", gguf_path(f), m.s);
    return cf_fail(err, "%s: unknown tokenizer model '%s' (%s)", gguf_path(f), m.s, KEY_MODEL);
}

/* Copies and validates the token texts into one arena. */
static int load_texts(tokenizer *t, const gguf_file *f, const gguf_str *strs, uint64_t n, cf_err *err) {
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (strs[i].len > UINT32_MAX / 2)
            return cf_fail(err, "%s: %s[%llu] is too long", gguf_path(f), KEY_TOKENS, (unsigned long long)i);
        total += strs[i].len + 1;
    }
    t->tokens = calloc((size_t)n, sizeof *t->tokens);
    t->arena = malloc(total ? total : 1);
    if (!t->tokens || !t->arena) return cf_fail(err, "tokenizer: out of memory");
    char *p = t->arena;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_str *s = &strs[i];
        if (memchr(s->s, 0, s->len))
            return cf_fail(err, "%s: %s[%llu] contains a NUL byte", gguf_path(f), KEY_TOKENS, (unsigned long long)i);
        if (!utf8_valid(s->s, s->len))
            return cf_fail(err, "%s: %s[%llu] is not valid UTF-8", gguf_path(f), KEY_TOKENS, (unsigned long long)i);
        memcpy(p, s->s, s->len);
        p[s->len] = 0;
        t->tokens[i].text = p;
        t->tokens[i].len = (uint32_t)s->len;
        t->tokens[i].type = TOKEN_TYPE_NORMAL;
        if (s->len > t->max_token_len) t->max_token_len = s->len;
        p += s->len + 1;
    }
    return 0;
}

static int load_scores(tokenizer *t, const gguf_file *f, cf_err *err) {
    float *sc = NULL;
    uint64_t n = 0;
    int rc = gguf_get_arr_f32(f, KEY_SCORES, &sc, &n, err);
    if (rc < 0) return -1;
    if (rc > 0) return 0; /* optional: scores stay 0 */
    int ret = 0;
    if (n != (uint64_t)t->n_vocab) {
        ret = cf_fail(err, "%s: %s has %llu entries but %s has %d", gguf_path(f), KEY_SCORES, (unsigned long long)n,
                      KEY_TOKENS, t->n_vocab);
    } else {
        for (int32_t i = 0; i < t->n_vocab && ret == 0; i++) {
            if (!isfinite(sc[i])) ret = cf_fail(err, "%s: %s[%d] is not a finite number", gguf_path(f), KEY_SCORES, i);
            t->tokens[i].score = sc[i];
        }
    }
    free(sc);
    return ret;
}

static int load_types(tokenizer *t, const gguf_file *f, cf_err *err) {
    int64_t *ty = NULL;
    uint64_t n = 0;
    int rc = gguf_get_arr_i64(f, KEY_TYPES, &ty, &n, err);
    if (rc < 0) return -1;
    if (rc > 0) return 0; /* optional: all NORMAL */
    int ret = 0;
    if (n != (uint64_t)t->n_vocab) {
        ret = cf_fail(err, "%s: %s has %llu entries but %s has %d", gguf_path(f), KEY_TYPES, (unsigned long long)n,
                      KEY_TOKENS, t->n_vocab);
    } else {
        for (int32_t i = 0; i < t->n_vocab && ret == 0; i++) {
            if (ty[i] < TOKEN_TYPE_UNDEFINED || ty[i] > TOKEN_TYPE_BYTE)
                ret = cf_fail(err, "%s: %s[%d] = %lld is not a token type (0..6)", gguf_path(f), KEY_TYPES, i,
                              (long long)ty[i]);
            else t->tokens[i].type = (uint8_t)ty[i];
        }
    }
    free(ty);
    return ret;
}

static int build_hash(tokenizer *t) {
    size_t cap = 16;
    while (cap < 2 * (size_t)t->n_vocab) cap *= 2;
    t->hslots = malloc(cap * sizeof *t->hslots);
    if (!t->hslots) return -1;
    memset(t->hslots, 0xff, cap * sizeof *t->hslots);
    t->hmask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tok_token *k = &t->tokens[id];
        size_t i = (size_t)hash_bytes(k->text, k->len) & t->hmask;
        for (;;) {
            int32_t o = t->hslots[i];
            if (o < 0 || (t->tokens[o].len == k->len && !memcmp(t->tokens[o].text, k->text, k->len))) {
                t->hslots[i] = id; /* later duplicates replace earlier ones */
                break;
            }
            i = (i + 1) & t->hmask;
        }
    }
    return 0;
}

/* Reads an optional token-id key; out-of-range values keep the default. */
static int load_special_id(const gguf_file *f, const char *key, int32_t n_vocab, int32_t *id, cf_err *err) {
    int64_t v;
    int rc = gguf_get_int(f, key, &v, err);
    if (rc < 0) return -1;
    if (rc == 0 && v >= 0 && v < n_vocab) *id = (int32_t)v;
    return 0;
}

static int load_flag(const gguf_file *f, const char *key, bool *out, cf_err *err) {
    return gguf_get_bool(f, key, out, err) < 0 ? -1 : 0;
}

/* tokenizer.ggml.precompiled_charsmap (u8 array) with tokenizer.hf.charsmap_per_grapheme:
 * SentencePiece's normalizer as `tokenizers` applies it (text/charsmap.h), followed by
 * tokenizer.hf.normalizer_strip_right and tokenizer.hf.normalizer_collapse_spaces. Without
 * that flag (a llama.cpp T5 GGUF: SentencePiece's own longest-match walk) it is refused. */
static int load_charsmap(tokenizer *t, const gguf_file *f, cf_err *err) {
    if (gguf_find_key(f, "tokenizer.ggml.precompiled_charsmap") < 0) return 0;
    bool per_grapheme = false, strip = false;
    if (load_flag(f, "tokenizer.hf.charsmap_per_grapheme", &per_grapheme, err) != 0 ||
        load_flag(f, "tokenizer.hf.normalizer_strip_right", &strip, err) != 0)
        return -1;
    if (!per_grapheme)
        return cf_fail(err,
                       "%s: Unigram with SentencePiece's own precompiled charsmap walk (llama.cpp's T5 GGUF) is "
                       "not supported; Hugging Face directories are",
                       gguf_path(f));
    gguf_str collapse = {0};
    int rc = gguf_get_str(f, "tokenizer.hf.normalizer_collapse_spaces", &collapse, err);
    if (rc < 0) return -1;
    int64_t *raw = NULL;
    uint64_t n = 0;
    if (gguf_get_arr_i64(f, "tokenizer.ggml.precompiled_charsmap", &raw, &n, err) != 0) return -1;
    uint8_t *blob = malloc(n ? n : 1);
    if (!blob) {
        free(raw);
        return cf_fail(err, "tokenizer: out of memory");
    }
    for (uint64_t i = 0; i < n; i++) blob[i] = (uint8_t)raw[i];
    free(raw);
    rc = charsmap_load(blob, n, rc == 0 ? collapse.s : NULL, strip, &t->charsmap, err);
    free(blob);
    return rc;
}

/* The Hugging Face keys hf_tokmodels.c writes (tokenizer.hf.*), the Unigram unknown
 * score, and the precompiled normalizer. */
static int load_hf_flags(tokenizer *t, const gguf_file *f, cf_err *err) {
    gguf_str s;
    int rc = gguf_get_str(f, "tokenizer.hf.prepend_scheme", &s, err);
    if (rc < 0) return -1;
    if (rc == 0 && strcmp(s.s, "first") && strcmp(s.s, "always"))
        return cf_fail(err, "%s: tokenizer.hf.prepend_scheme '%s' is not first or always", gguf_path(f), s.s);
    if (rc == 0) t->prepend = !strcmp(s.s, "first") ? TOK_PREPEND_FIRST : TOK_PREPEND_ALWAYS;
    t->bert_lowercase = t->bert_strip_accents = true;
    if (load_flag(f, "tokenizer.hf.metaspace_split", &t->metaspace_split, err) != 0 ||
        load_flag(f, "tokenizer.hf.byte_fallback", &t->byte_fallback, err) != 0 ||
        load_flag(f, "tokenizer.hf.bert_lowercase", &t->bert_lowercase, err) != 0 ||
        load_flag(f, "tokenizer.hf.bert_strip_accents", &t->bert_strip_accents, err) != 0)
        return -1;
    if (t->algo != TOK_ALGO_UGM) return 0;
    if (load_charsmap(t, f, err) != 0) return -1;
    uint64_t n = 0;
    rc = gguf_get_arr_f64(f, "tokenizer.hf.scores_f64", &t->ugm_scores, &n, err);
    if (rc < 0) return -1;
    if (rc == 0 && n != (uint64_t)t->n_vocab)
        return cf_fail(err, "%s: tokenizer.hf.scores_f64 has %llu entries for %d tokens", gguf_path(f),
                       (unsigned long long)n, (int)t->n_vocab);
    double lo = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        double sc = t->ugm_scores ? t->ugm_scores[i] : t->tokens[i].score;
        if (t->tokens[i].type != TOKEN_TYPE_UNUSED && sc < lo) lo = sc;
    }
    t->ugm_unk_score = lo - 10.0;
    return 0;
}

static int load_specials_and_flags(tokenizer *t, const gguf_file *f, cf_err *err) {
    /* llama.cpp's defaults per vocabulary type (ids out of range: none) */
    t->pad = t->eot = t->eom = t->sep = -1;
    t->add_eos = false;
    t->add_sep = false;
    if (t->algo == TOK_ALGO_SPM) {
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
    } else if (t->algo == TOK_ALGO_BPE) {
        t->bos = 11, t->eos = 11, t->unk = -1;
        t->add_bos = false;
        t->add_space_prefix = false;
    } else if (t->algo == TOK_ALGO_UGM) {
        t->bos = -1, t->eos = 1, t->unk = 2, t->pad = 0;
        t->add_bos = false;
        t->add_eos = true;
        t->add_space_prefix = true;
    } else {
        t->bos = 101, t->eos = -1, t->unk = 100, t->sep = 102, t->pad = 0;
        t->add_bos = true;
        t->add_sep = true;
        t->add_space_prefix = false;
    }
    int32_t *defaults[] = {&t->bos, &t->eos, &t->unk, &t->sep, &t->pad};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (*defaults[i] >= t->n_vocab) *defaults[i] = -1;
    static const struct {
        const char *key;
        size_t off;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(tokenizer, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(tokenizer, eos)},
        {"tokenizer.ggml.unknown_token_id", offsetof(tokenizer, unk)},
        {"tokenizer.ggml.padding_token_id", offsetof(tokenizer, pad)},
        {"tokenizer.ggml.eot_token_id", offsetof(tokenizer, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(tokenizer, eom)},
        {"tokenizer.ggml.seperator_token_id", offsetof(tokenizer, sep)},
        {"tokenizer.ggml.cls_token_id", offsetof(tokenizer, bos)},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (load_special_id(f, ids[i].key, t->n_vocab, (int32_t *)((char *)t + ids[i].off), err) != 0) return -1;
    if (load_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err) != 0 ||
        load_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err) != 0 ||
        load_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err) != 0 ||
        load_flag(f, "tokenizer.ggml.add_sep_token", &t->add_sep, err) != 0)
        return -1;
    return load_hf_flags(t, f, err);
}

/* tokenizer.hf.eos_token_ids (generation_config.json's list): each in range ends generation. */
static int load_eos_list(tokenizer *t, const gguf_file *f, cf_err *err) {
    int64_t *ids = NULL;
    uint64_t n = 0;
    int rc = gguf_get_arr_i64(f, "tokenizer.hf.eos_token_ids", &ids, &n, err);
    if (rc < 0) return -1;
    for (uint64_t i = 0; rc == 0 && i < n; i++)
        if (ids[i] >= 0 && ids[i] < t->n_vocab) t->eog[ids[i]] = 1;
    free(ids);
    return 0;
}

static int build_eog(tokenizer *t) {
    static const char *const names[] = {"<|eot_id|>",    "<|im_end|>", "<|end|>", "<end_of_turn>",
                                        "<|endoftext|>", "<|eom_id|>", "<EOT>",   "_<EOT>"};
    t->eog = calloc((size_t)t->n_vocab, 1);
    if (!t->eog) return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int32_t id = tok_lookup(t, names[i], strlen(names[i]));
        if (id >= 0 && (t->tokens[id].type == TOKEN_TYPE_CONTROL || t->tokens[id].type == TOKEN_TYPE_USER_DEFINED))
            t->eog[id] = 1;
    }
    const int32_t fixed[] = {t->eos, t->eot, t->eom};
    for (size_t i = 0; i < 3; i++)
        if (fixed[i] >= 0) t->eog[fixed[i]] = 1;
    return 0;
}

typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int cmp_special(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int build_specials(tokenizer *t) {
    special_key *keys = malloc((size_t)t->n_vocab * sizeof *keys);
    if (!keys) return -1;
    size_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        int ty = t->tokens[id].type;
        if ((ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_USER_DEFINED || ty == TOKEN_TYPE_UNKNOWN) &&
            t->tokens[id].len > 0)
            keys[n++] = (special_key){t->tokens[id].len, id};
    }
    qsort(keys, n, sizeof *keys, cmp_special);
    t->specials = malloc((n ? n : 1) * sizeof *t->specials);
    if (!t->specials) {
        free(keys);
        return -1;
    }
    for (size_t i = 0; i < n; i++) t->specials[i] = keys[i].id;
    t->n_specials = n;
    free(keys);
    return 0;
}

static bool contains_any(const char *hay, const char *const *needles, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strstr(hay, needles[i])) return true;
    return false;
}

static void set_strip(tokenizer *t, const char *text, uint8_t bit, bool on) {
    int32_t id = tok_lookup(t, text, strlen(text));
    if (id < 0) return;
    if (on) t->tokens[id].strip |= bit;
    else t->tokens[id].strip &= (uint8_t)~bit;
}

/* The per-token strip attributes llama.cpp's vocabulary loader sets from
 * metadata names (they are not stored in GGUF): "<mask>" strips to its left
 * for the jina-v2 pre-tokenizers and nomic-bert-moe / jina-bert-v3; a model
 * whose general.name (lower-cased) holds "phi-3" or "phi3" has every special
 * token strip to its right except <unk>, <s> and <|endoftext|>; "modern-bert"
 * gives "[MASK]" a left strip. Missing or non-string keys count as "". */
static void load_strip_attrs(tokenizer *t, const gguf_file *f) {
    char name[256] = "", pre[128] = "", arch[128] = "";
    struct {
        const char *key;
        char *buf;
        size_t cap;
    } keys[] = {
        {"general.name", name, sizeof name},
        {"tokenizer.ggml.pre", pre, sizeof pre},
        {"general.architecture", arch, sizeof arch},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        gguf_str v;
        if (gguf_get_str(f, keys[i].key, &v, NULL) == 0) snprintf(keys[i].buf, keys[i].cap, "%s", v.s);
    }
    for (char *c = name; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    static const char *const jina_pre[] = {"jina-v2-de", "jina-v2-es", "jina-v2-code"};
    static const char *const jina_arch[] = {"nomic-bert-moe", "jina-bert-v3"};
    static const char *const phi3[] = {"phi-3", "phi3"};
    static const char *const modern_bert[] = {"modern-bert"};
    if (contains_any(pre, jina_pre, 3) || contains_any(arch, jina_arch, 2)) {
        set_strip(t, "<mask>", TOK_STRIP_LEFT, true);
    } else if (contains_any(name, phi3, 2)) {
        for (size_t i = 0; i < t->n_specials; i++) t->tokens[t->specials[i]].strip |= TOK_STRIP_RIGHT;
        set_strip(t, "</s>", TOK_STRIP_RIGHT, true);
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < 3; i++) set_strip(t, keep[i], TOK_STRIP_RIGHT, false);
    } else if (contains_any(name, modern_bert, 1)) {
        set_strip(t, "[MASK]", TOK_STRIP_LEFT, true);
    }
}

/* BYTE tokens must read <0xXX>; byte_tok[] maps each byte to its token. */
static int build_byte_tokens(tokenizer *t, const gguf_file *f, cf_err *err) {
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tok_token *k = &t->tokens[id];
        if (k->type == TOKEN_TYPE_BYTE && parse_byte_token(k->text, k->len) < 0)
            return cf_fail(err, "%s: token %d has type BYTE but its text '%s' is not <0xXX>", gguf_path(f), id,
                           k->text);
    }
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char s[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        int32_t id = tok_lookup(t, s, 6);
        if (id < 0) {
            char c = (char)b;
            id = tok_lookup(t, &c, 1);
        }
        t->byte_tok[b] = id;
    }
    return 0;
}

static int load_vocab(tokenizer *t, const gguf_file *f, cf_err *err) {
    const gguf_str *strs = NULL;
    uint64_t n = 0;
    int rc = gguf_get_arr_str(f, KEY_TOKENS, &strs, &n, err);
    if (rc < 0) return -1;
    if (rc > 0) return cf_fail(err, "%s: key %s missing", gguf_path(f), KEY_TOKENS);
    if (n == 0 || n > INT32_MAX / 4)
        return cf_fail(err, "%s: %s has %llu entries (expected 1..%d)", gguf_path(f), KEY_TOKENS, (unsigned long long)n,
                       INT32_MAX / 4);
    t->n_vocab = (int32_t)n;
    if (load_texts(t, f, strs, n, err) != 0 || load_scores(t, f, err) != 0 || load_types(t, f, err) != 0) return -1;
    if (build_hash(t) != 0) return cf_fail(err, "tokenizer: out of memory");
    return 0;
}

int tokenizer_load_gguf(const gguf_file *f, tokenizer **out, cf_err *err) {
    *out = NULL;
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return cf_fail(err, "tokenizer: out of memory");
    if (load_model_name(f, &t->algo, err) != 0 || load_vocab(t, f, err) != 0 ||
        load_specials_and_flags(t, f, err) != 0 || build_byte_tokens(t, f, err) != 0)
        goto fail;
    if (t->algo == TOK_ALGO_BPE && bpe_load(t, f, err) != 0) goto fail;
    if (build_eog(t) != 0 || build_specials(t) != 0) {
        cf_fail(err, "tokenizer: out of memory");
        goto fail;
    }
    if (load_eos_list(t, f, err) != 0) goto fail;
    load_strip_attrs(t, f);
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return -1;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    free(t->tokens);
    free(t->arena);
    free(t->hslots);
    free(t->eog);
    free(t->specials);
    bpe_free(t->bpe);
    charsmap_free(t->charsmap);
    free(t->ugm_scores);
    free(t);
}

/* -------------------------------------------------------------- accessors */

int32_t tokenizer_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
bool tokenizer_add_bos(const tokenizer *t) { return t->add_bos && t->bos >= 0; }
bool tokenizer_add_eos(const tokenizer *t) { return t->add_eos && t->eos >= 0; }
bool tokenizer_add_space_prefix(const tokenizer *t) { return t->add_space_prefix || t->algo == TOK_ALGO_WPM; }
size_t tokenizer_max_token_len(const tokenizer *t) { return t->max_token_len; }

static bool valid_id(const tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab; }

bool tokenizer_is_eog(const tokenizer *t, int32_t id) { return valid_id(t, id) && t->eog[id]; }

int tokenizer_token_type(const tokenizer *t, int32_t id) {
    return valid_id(t, id) ? t->tokens[id].type : TOKEN_TYPE_UNDEFINED;
}

const char *tokenizer_token_text(const tokenizer *t, int32_t id) { return valid_id(t, id) ? t->tokens[id].text : ""; }

/* ----------------------------------------------------------------- encode */

/* A piece of the input: raw text [off, off + len) when id < 0, else a token. */
typedef struct frag {
    int32_t id;
    size_t off, len;
} frag;

typedef struct frag_list {
    frag *v;
    size_t n, cap;
} frag_list;

static int frag_push(frag_list *l, int32_t id, size_t off, size_t len) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        frag *p = realloc(l->v, cap * sizeof *p);
        if (!p) return -1;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = (frag){id, off, len};
    return 0;
}

/* ASCII whitespace as C's isspace in the "C" locale (llama.cpp's test). */
static bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Splits every raw fragment of `in` around the occurrences of token `id`
 * (left to right, non-overlapping) into `out`. A token with TOK_STRIP_LEFT
 * drops the whitespace that ends the raw text before it, TOK_STRIP_RIGHT the
 * whitespace that starts the raw text after it (within the fragment: as
 * llama.cpp's tokenizer_st_partition), and raw text left empty goes. */
static int split_on_token(const tokenizer *t, const char *text, int32_t id, const frag_list *in, frag_list *out) {
    const tok_token *k = &t->tokens[id];
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        frag f = in->v[i];
        if (f.id >= 0 || f.len < k->len) {
            if (frag_push(out, f.id, f.off, f.len) != 0) return -1;
            continue;
        }
        size_t pos = f.off, end = f.off + f.len;
        while (pos < end) {
            const char *m = memmem(text + pos, end - pos, k->text, k->len);
            if (!m) break;
            size_t at = (size_t)(m - text), left_end = at;
            if (k->strip & TOK_STRIP_LEFT)
                while (left_end > pos && ascii_space(text[left_end - 1])) left_end--;
            if (left_end > pos && frag_push(out, -1, pos, left_end - pos) != 0) return -1;
            if (frag_push(out, id, 0, 0) != 0) return -1;
            pos = at + k->len;
            if (k->strip & TOK_STRIP_RIGHT)
                while (pos < end && ascii_space(text[pos])) pos++;
        }
        if (pos < end && frag_push(out, -1, pos, end - pos) != 0) return -1;
    }
    return 0;
}

/* Splits text into raw fragments and special tokens the way llama.cpp's
 * tokenizer_st_partition does: candidates longest first, each one cutting
 * every raw fragment left so far. USER_DEFINED tokens always match;
 * CONTROL and UNKNOWN ones only with parse_special. On success *res holds
 * the result (owned by the caller). */
static int partition(const tokenizer *t, const char *text, size_t len, bool parse_special, frag_list *res) {
    frag_list a = {0}, b = {0};
    if (len > 0 && frag_push(&a, -1, 0, len) != 0) goto oom;
    /* cheap filters: which bytes and which byte pairs occur at all (vocabs
     * with thousands of USER_DEFINED tokens would otherwise scan the text
     * once per token) */
    bool present[256] = {false};
    uint64_t pairs[65536 / 64] = {0};
    for (size_t i = 0; i < len; i++) {
        present[(unsigned char)text[i]] = true;
        if (i + 1 < len) {
            unsigned p = (unsigned)(unsigned char)text[i] << 8 | (unsigned char)text[i + 1];
            pairs[p >> 6] |= 1ull << (p & 63);
        }
    }
    for (size_t s = 0; s < t->n_specials && len > 0; s++) {
        int32_t id = t->specials[s];
        const tok_token *k = &t->tokens[id];
        if (!parse_special && k->type != TOKEN_TYPE_USER_DEFINED) continue;
        if (k->len > len || !present[(unsigned char)k->text[0]]) continue;
        if (k->len >= 2) {
            unsigned p = (unsigned)(unsigned char)k->text[0] << 8 | (unsigned char)k->text[1];
            if (!(pairs[p >> 6] >> (p & 63) & 1)) continue;
            if (!memmem(text, len, k->text, k->len)) continue;
        }
        if (split_on_token(t, text, id, &a, &b) != 0) goto oom;
        frag_list tmp = a;
        a = b;
        b = tmp;
    }
    free(b.v);
    *res = a;
    return 0;
oom:
    free(a.v);
    free(b.v);
    return -1;
}

typedef struct enc_ws {
    spm_ws spm;
    bpe_ws bpe;
    ugm_ws ugm;
    char *norm; /* a fragment after the precompiled normalizer */
    size_t norm_cap;
} enc_ws;

/* Metaspace's test, after it turned spaces into "▁": the text starts with "▁" */
static bool starts_with_space(const char *text, size_t len) {
    return len > 0 && (text[0] == ' ' || (len >= 3 && !memcmp(text, "\xE2\x96\x81", 3)));
}

/* Whether this fragment gets the space prefix (see tokenizer.prepend). */
static bool space_prefix(const tokenizer *t, const char *text, size_t len, size_t off, bool after_special) {
    if (!t->add_space_prefix) return false;
    switch (t->prepend) {
    case TOK_PREPEND_FIRST: return off == 0 && !starts_with_space(text, len);
    case TOK_PREPEND_ALWAYS: return !starts_with_space(text, len);
    default: return after_special;
    }
}

static int encode_fragment(const tokenizer *t, enc_ws *ws, const char *text, size_t len, bool prefix, tok_idvec *out,
                           cf_err *err) {
    switch (t->algo) {
    case TOK_ALGO_SPM: return spm_encode(t, &ws->spm, text, len, prefix, out, err);
    case TOK_ALGO_UGM: return ugm_encode(t, &ws->ugm, text, len, prefix, out, err);
    case TOK_ALGO_BPE: return bpe_encode(t, &ws->bpe, text, len, out, err);
    case TOK_ALGO_WPM: return wpm_encode(t, text, len, out, err);
    }
    return cf_fail(err, "tokenize: internal error (algorithm %d)", (int)t->algo);
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                     int32_t **ids, size_t *n_ids, cf_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return cf_fail(err, "tokenize: NULL text");
    tok_idvec out = {0};
    frag_list frags = {0};
    enc_ws ws = {0};
    if (tok_idvec_reserve(&out, len / 2 + 4) != 0) goto oom;
    if (add_special && tokenizer_add_bos(t)) tok_idvec_push(&out, t->bos);
    if (partition(t, text, len, parse_special, &frags) != 0) goto oom;
    bool prev_special = true; /* a space prefix goes at the start and after each special token */
    for (size_t i = 0; i < frags.n; i++) {
        const frag *f = &frags.v[i];
        if (f->id >= 0) {
            if (tok_idvec_push(&out, f->id) != 0) goto oom;
            prev_special = true;
        } else {
            const char *ft = text + f->off;
            size_t fl = f->len;
            if (t->charsmap) { /* tokenizer.json order: normalizer, then the Metaspace prefix */
                if (charsmap_normalize(t->charsmap, ft, fl, &ws.norm, &ws.norm_cap, &fl) != 0) goto oom;
                ft = ws.norm;
                if (fl == 0) continue;
            }
            bool prefix = space_prefix(t, ft, fl, f->off, prev_special);
            if (encode_fragment(t, &ws, ft, fl, prefix, &out, err) != 0) goto fail;
            prev_special = false;
        }
    }
    if (add_special && tokenizer_add_eos(t) && tok_idvec_push(&out, t->eos) != 0) goto oom;
    if (add_special && t->add_sep && t->sep >= 0 && tok_idvec_push(&out, t->sep) != 0) goto oom;
    free(frags.v);
    spm_ws_free(&ws.spm);
    bpe_ws_free(&ws.bpe);
    ugm_ws_free(&ws.ugm);
    free(ws.norm);
    *ids = out.v;
    *n_ids = out.n;
    return 0;
oom:
    cf_fail(err, "tokenize: out of memory");
fail:
    free(out.v);
    free(frags.v);
    spm_ws_free(&ws.spm);
    bpe_ws_free(&ws.bpe);
    ugm_ws_free(&ws.ugm);
    free(ws.norm);
    return -1;
}

/* ------------------------------------------------------------ token bytes */

/* Copies src into buf as far as cap allows; returns the full length. */
static size_t copy_capped(char *buf, size_t cap, size_t at, const char *src, size_t n) {
    if (at < cap) memcpy(buf + at, src, n < cap - at ? n : cap - at);
    return at + n;
}

/* The text with every U+2581 turned into ' '. */
static size_t unescape_spaces(const tok_token *k, char *buf, size_t cap) {
    size_t o = 0, i = 0;
    while (i < k->len) {
        if (i + 3 <= k->len && !memcmp(k->text + i, "\xE2\x96\x81", 3)) {
            o = copy_capped(buf, cap, o, " ", 1);
            i += 3;
        } else {
            o = copy_capped(buf, cap, o, k->text + i, 1);
            i++;
        }
    }
    return o;
}

size_t tokenizer_token_bytes(const tokenizer *t, int32_t id, bool special, char *buf, size_t cap) {
    if (!valid_id(t, id)) return 0;
    const tok_token *k = &t->tokens[id];
    switch (k->type) {
    case TOKEN_TYPE_CONTROL:
    case TOKEN_TYPE_UNKNOWN: return special ? copy_capped(buf, cap, 0, k->text, k->len) : 0;
    case TOKEN_TYPE_USER_DEFINED: return copy_capped(buf, cap, 0, k->text, k->len);
    case TOKEN_TYPE_NORMAL:
        return t->algo == TOK_ALGO_BPE ? bpe_token_bytes(t, k, buf, cap) : unescape_spaces(k, buf, cap);
    case TOKEN_TYPE_BYTE: {
        char c = (char)parse_byte_token(k->text, k->len);
        return copy_capped(buf, cap, 0, &c, 1);
    }
    default: return 0; /* UNDEFINED, UNUSED */
    }
}
