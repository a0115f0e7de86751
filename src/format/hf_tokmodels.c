/* hf_tokmodels.c - the SentencePiece-style and BERT kinds of tokenizer.json as
 * tokenizer.ggml.* keys (hf_vocab.c does byte-level BPE and the dispatch).
 *
 * - BPE with byte fallback / Metaspace ("llama" model, cinfer's SPM encoder):
 *   the merge list becomes scores, score(t) = -(rank of the first merge that
 *   makes t), so the SPM "best scoring adjacent pair" loop replays the merges
 *   in rank order; tokens no merge makes score below every merge. Exact for
 *   vocabularies where a token's every split that is a pair of tokens is a
 *   listed merge (SentencePiece-derived ones) and for one merge per token.
 * - Unigram ("t5" model, cinfer's Viterbi encoder in text/ugm.c): pieces and
 *   scores as given; unk_id, byte_fallback; SentencePiece's Precompiled
 *   normalizer (hf_normalizer.c) before the Metaspace pre-tokenizer.
 * - WordPiece ("bert" model, text/wpm.c): llama.cpp's spelling, "##x" -> "x",
 *   a word-initial "x" -> "▁x", "[...]" kept; BertNormalizer cased or not,
 *   accents stripped or not (tokenizer.hf.bert_lowercase / _strip_accents).
 * Spaces: llama-2's normalizer Prepend("▁") + Replace(" ", "▁") is llama.cpp's
 * add_space_prefix; a Metaspace pre-tokenizer adds tokenizer.hf.prepend_scheme
 * ("first": only at offset 0, "always": every fragment; neither when the text
 * already starts with a space) and tokenizer.hf.metaspace_split. The
 * post-processor (TemplateProcessing / BertProcessing) decides add_bos /
 * add_eos / add_sep and their ids. Anything else is refused naming the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/hf_internal.h"
#include "format/safetensors.h"

#define TJ "tokenizer.json"
#define SPACE_MARK "\xE2\x96\x81" /* U+2581 */
#define TOK_NORMAL 1
#define TOK_BYTE 6

typedef struct metaspace {
    bool prefix; /* a ▁ goes in front of (some) fragments */
    const char *scheme; /* "legacy" (llama.cpp's rule), "first" or "always" */
    bool split; /* Metaspace split: words end before each ▁ */
} metaspace;

static bool is_str(json_t *o, const char *key, const char *want) {
    const char *s = json_string_value(json_object_get(o, key));
    return s && !strcmp(s, want);
}

/* llama-2's normalizer: [Prepend("▁")], Replace(" ", "▁") */
static int legacy_normalizer(json_t *norm, metaspace *m, cf_err *err) {
    json_t *list = is_str(norm, "type", "Sequence") ? json_object_get(norm, "normalizers") : NULL;
    size_t n = list ? json_array_size(list) : 1, i = 0;
    json_t *first = list ? json_array_get(list, 0) : norm;
    if (n == 2 && is_str(first, "type", "Prepend") && is_str(first, "prepend", SPACE_MARK)) m->prefix = true, i = 1;
    json_t *rep = list ? json_array_get(list, i) : norm;
    if (i + 1 != n || !is_str(rep, "type", "Replace") || !is_str(json_object_get(rep, "pattern"), "String", " ") ||
        !is_str(rep, "content", SPACE_MARK))
        return cf_fail(err, TJ ": field normalizer: only llama-2's Prepend(\"▁\") + Replace(\" \", \"▁\") is supported "
                               "with a SentencePiece-style model");
    m->scheme = "legacy";
    return 0;
}

/* norm_done: the normalizer is SentencePiece's Precompiled, handled by the caller */
static int read_metaspace(json_t *tj, bool norm_done, metaspace *m, cf_err *err) {
    json_t *norm = norm_done ? NULL : json_object_get(tj, "normalizer"), *pre = json_object_get(tj, "pre_tokenizer");
    *m = (metaspace){.prefix = false, .scheme = "legacy", .split = false};
    bool has_norm = norm && !json_is_null(norm), has_pre = pre && !json_is_null(pre);
    if (has_norm && hf_tok_has_precompiled(tj))
        return cf_fail(
            err, TJ
            ": field normalizer: the Precompiled (SentencePiece charsmap) normalizer is supported with Unigram only");
    if (has_norm && has_pre)
        return cf_fail(err,
                       TJ ": field pre_tokenizer: a normalizer together with a pre-tokenizer is not supported here");
    if (has_norm) return legacy_normalizer(norm, m, err);
    if (!has_pre) return cf_fail(err, TJ ": field pre_tokenizer: missing (needs Metaspace or a ▁ normalizer)");
    if (!is_str(pre, "type", "Metaspace"))
        return cf_fail(err, TJ ": field pre_tokenizer: only Metaspace is supported with a SentencePiece-style model");
    if (!is_str(pre, "replacement", SPACE_MARK))
        return cf_fail(err, TJ ": field pre_tokenizer.replacement: only \"▁\" is supported");
    json_t *sch = json_object_get(pre, "prepend_scheme"), *aps = json_object_get(pre, "add_prefix_space");
    const char *s = json_string_value(sch);
    if (sch && !s) return cf_fail(err, TJ ": field pre_tokenizer.prepend_scheme: not a string");
    if (s && strcmp(s, "first") && strcmp(s, "always") && strcmp(s, "never"))
        return cf_fail(err, TJ ": field pre_tokenizer.prepend_scheme: '%s' is not first, always or never",
                       st_escape(s, (char[40]){0}, 40));
    if (!s) s = aps && json_is_false(aps) ? "never" : "always";
    m->prefix = strcmp(s, "never") != 0;
    m->scheme = !strcmp(s, "first") ? "first" : "always";
    json_t *split = json_object_get(pre, "split");
    m->split = !split || json_is_true(split);
    return 0;
}

static void write_metaspace(const metaspace *m, gguf_writer *w) {
    gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", m->prefix);
    if (strcmp(m->scheme, "legacy")) gguf_set_str(w, "tokenizer.hf.prepend_scheme", m->scheme);
    gguf_set_bool(w, "tokenizer.hf.metaspace_split", m->split);
}

static int64_t vocab_find(const hf_vocab *v, const char *s) {
    for (int64_t i = 0; i < v->n; i++)
        if (!strcmp(v->text[i], s)) return i;
    return -1;
}

/* post_processor: the special token ids before and after the text ($A). */
static int read_post(json_t *tj, const hf_vocab *v, int64_t *pre_id, int64_t *post_id, cf_err *err) {
    json_t *pp = json_object_get(tj, "post_processor");
    *pre_id = *post_id = -1;
    if (!pp || json_is_null(pp)) return 0;
    if (is_str(pp, "type", "BertProcessing") || is_str(pp, "type", "RobertaProcessing")) {
        json_t *cls = json_object_get(pp, "cls"), *sep = json_object_get(pp, "sep");
        if (!json_is_integer(json_array_get(cls, 1)) || !json_is_integer(json_array_get(sep, 1)))
            return cf_fail(err, TJ ": field post_processor: cls / sep must be [token, id]");
        *pre_id = json_integer_value(json_array_get(cls, 1));
        *post_id = json_integer_value(json_array_get(sep, 1));
    } else if (is_str(pp, "type", "TemplateProcessing")) {
        json_t *single = json_object_get(pp, "single"), *e;
        size_t i;
        bool seen_a = false;
        json_array_foreach(single, i, e) {
            json_t *sp = json_object_get(e, "SpecialToken");
            if (json_object_get(e, "Sequence")) {
                seen_a = true;
                continue;
            }
            const char *name = json_string_value(json_object_get(sp, "id"));
            int64_t id = name ? vocab_find(v, name) : -1;
            if (id < 0) return cf_fail(err, TJ ": field post_processor.single[%zu]: not a token of the vocabulary", i);
            int64_t *slot = seen_a ? post_id : pre_id;
            if (*slot >= 0) return cf_fail(err, TJ ": field post_processor.single: more than one token on a side");
            *slot = id;
        }
        if (!seen_a) return cf_fail(err, TJ ": field post_processor.single: no $A sequence");
    } else {
        return cf_fail(err, TJ ": field post_processor: only TemplateProcessing or BertProcessing is supported");
    }
    if (*pre_id >= v->n || *post_id >= v->n)
        return cf_fail(err, TJ ": field post_processor: token id outside the vocabulary");
    return 0;
}

int hf_tok_write_post(json_t *tj, const hf_vocab *v, bool bert, gguf_writer *w, cf_err *err) {
    int64_t pre_id, post_id;
    if (read_post(tj, v, &pre_id, &post_id, err)) return -1;
    gguf_set_bool(w, "tokenizer.ggml.add_bos_token", pre_id >= 0);
    if (pre_id >= 0) gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)pre_id);
    gguf_set_bool(w, bert ? "tokenizer.ggml.add_sep_token" : "tokenizer.ggml.add_eos_token", post_id >= 0);
    if (post_id >= 0)
        gguf_set_u32(w, bert ? "tokenizer.ggml.seperator_token_id" : "tokenizer.ggml.eos_token_id", (uint32_t)post_id);
    return 0;
}

static int set_unk(const hf_vocab *v, const char *name, gguf_writer *w, cf_err *err) {
    if (!name) return 0;
    int64_t id = vocab_find(v, name);
    if (id < 0) return cf_fail(err, TJ ": field model.unk_token: not a token of the vocabulary");
    gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)id);
    return 0;
}

static void mark_byte_tokens(hf_vocab *v) {
    for (int64_t i = 0; i < v->n; i++) {
        const char *s = v->text[i];
        if (v->type[i] == TOK_NORMAL && strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' &&
            strchr("0123456789ABCDEF", s[3]) && strchr("0123456789ABCDEF", s[4]))
            v->type[i] = TOK_BYTE;
    }
}

bool hf_tok_is_metaspace(json_t *tj) {
    json_t *pre = json_object_get(tj, "pre_tokenizer"), *norm = json_object_get(tj, "normalizer");
    return json_is_true(json_object_get(json_object_get(tj, "model"), "byte_fallback")) ||
           is_str(pre, "type", "Metaspace") || is_str(norm, "type", "Replace") ||
           (is_str(norm, "type", "Sequence") && json_array_size(json_object_get(norm, "normalizers")) > 0) ||
           is_str(norm, "type", "Prepend");
}

/* score(t) = -(rank of the first merge making t); others below every merge */
static int merge_scores(json_t *model, hf_vocab *v, cf_err *err) {
    json_t *merges = json_object_get(model, "merges"), *map = json_object_get(model, "vocab");
    if (!json_is_array(merges)) return cf_fail(err, TJ ": field model.merges: missing or not an array");
    size_t n = json_array_size(merges);
    if (!(v->score = malloc((size_t)(v->n ? v->n : 1) * sizeof *v->score))) return cf_fail(err, TJ ": out of memory");
    for (int64_t i = 0; i < v->n; i++) v->score[i] = -(double)n - 1.0;
    char *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t r = 0; r < n && !rc; r++) {
        json_t *m = json_array_get(merges, r);
        const char *s = json_string_value(m), *sp = s ? strchr(s, ' ') : NULL;
        const char *l = s, *rt = sp ? sp + 1 : NULL;
        size_t ll = sp ? (size_t)(sp - s) : 0;
        if (!s && json_array_size(m) == 2) {
            l = json_string_value(json_array_get(m, 0)), rt = json_string_value(json_array_get(m, 1));
            ll = l ? strlen(l) : 0;
        }
        if (!l || !rt || !ll || !*rt) {
            rc = cf_fail(err, TJ ": field model.merges[%zu]: not two tokens", r);
            break;
        }
        size_t need = ll + strlen(rt) + 1;
        if (need > cap) {
            char *nb = realloc(buf, need);
            if (!nb) {
                rc = cf_fail(err, TJ ": out of memory");
                break;
            }
            buf = nb, cap = need;
        }
        memcpy(buf, l, ll);
        strcpy(buf + ll, rt);
        json_t *id = json_object_get(map, buf);
        if (!json_is_integer(id) || json_integer_value(id) >= v->n)
            rc = cf_fail(err, TJ ": field model.merges[%zu]: the merged token is not in model.vocab", r);
        else if (v->score[json_integer_value(id)] < -(double)n) v->score[json_integer_value(id)] = -(double)r;
    }
    free(buf);
    return rc;
}

/* split=true equals no split for the SPM encoder iff no token has a ▁ after its start */
static int check_split(const hf_vocab *v, const metaspace *m, cf_err *err) {
    for (int64_t i = 0; m->split && i < v->n; i++)
        if (v->type[i] == TOK_NORMAL && strstr(v->text[i] + 1, SPACE_MARK))
            return cf_fail(err,
                           TJ ": field pre_tokenizer.split: token %lld has an inner ▁; a splitting Metaspace with "
                              "such tokens is not supported for BPE",
                           (long long)i);
    return 0;
}

int hf_tok_spm_bpe(json_t *tj, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err) {
    json_t *model = json_object_get(tj, "model");
    metaspace m;
    json_t *dropout = json_object_get(model, "dropout");
    if (json_is_number(dropout) && json_number_value(dropout) > 0)
        return cf_fail(err, TJ ": field model.dropout: BPE dropout is not supported");
    if (json_string_value(json_object_get(model, "continuing_subword_prefix")) ||
        json_string_value(json_object_get(model, "end_of_word_suffix")))
        return cf_fail(err, TJ ": field model.continuing_subword_prefix: subword affixes are not supported");
    if (read_metaspace(tj, false, &m, err) ||
        hf_vocab_collect(json_object_get(model, "vocab"), json_object_get(tj, "added_tokens"), v, err))
        return -1;
    if (json_is_true(json_object_get(model, "byte_fallback"))) mark_byte_tokens(v);
    if (check_split(v, &m, err) || merge_scores(model, v, err) || hf_vocab_write(v, vocab_size, w, err) ||
        set_unk(v, json_string_value(json_object_get(model, "unk_token")), w, err) ||
        hf_tok_write_post(tj, v, false, w, err))
        return -1;
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    write_metaspace(&m, w);
    return 0;
}

int hf_tok_unigram(json_t *tj, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err) {
    json_t *model = json_object_get(tj, "model"), *unk = json_object_get(model, "unk_id");
    metaspace m;
    bool precompiled = hf_tok_has_precompiled(tj);
    if (read_metaspace(tj, precompiled, &m, err) || (precompiled && hf_tok_precompiled(tj, w, err)) ||
        hf_vocab_collect(json_object_get(model, "vocab"), json_object_get(tj, "added_tokens"), v, err))
        return -1;
    if (!json_is_array(json_object_get(model, "vocab")))
        return cf_fail(err, TJ ": field model.vocab: a Unigram vocabulary is a list of [piece, score]");
    if (unk && !json_is_null(unk) &&
        (!json_is_integer(unk) || json_integer_value(unk) < 0 || json_integer_value(unk) >= v->n))
        return cf_fail(err, TJ ": field model.unk_id: not a token id of the vocabulary");
    bool byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    if (byte_fallback) mark_byte_tokens(v);
    if (hf_vocab_write(v, vocab_size, w, err) || hf_tok_write_post(tj, v, false, w, err)) return -1;
    /* tokenizers' Viterbi adds f64 scores: near-ties resolve as there only with the exact values */
    double *exact = calloc((size_t)vocab_size, sizeof *exact);
    if (!exact) return cf_fail(err, TJ ": out of memory");
    for (int64_t i = 0; i < v->n; i++) exact[i] = v->score[i];
    gguf_set_arr_f64(w, "tokenizer.hf.scores_f64", exact, (uint64_t)vocab_size);
    free(exact);
    gguf_set_str(w, "tokenizer.ggml.model", "t5");
    if (json_is_integer(unk)) gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)json_integer_value(unk));
    gguf_set_bool(w, "tokenizer.hf.byte_fallback", byte_fallback);
    write_metaspace(&m, w);
    return 0;
}

/* BERT: BertNormalizer(clean text, CJK split; lowercase and strip_accents as given, strip_accents
 * null following lowercase) + BertPreTokenizer. Sets *lower / *strip. */
static int check_bert(json_t *tj, json_t *model, bool *lower, bool *strip, cf_err *err) {
    json_t *norm = json_object_get(tj, "normalizer"), *sa = json_object_get(norm, "strip_accents");
    json_t *lc = json_object_get(norm, "lowercase");
    if (!is_str(norm, "type", "BertNormalizer") || json_is_false(json_object_get(norm, "clean_text")) ||
        json_is_false(json_object_get(norm, "handle_chinese_chars")))
        return cf_fail(err, TJ ": field normalizer: WordPiece needs BERT's BertNormalizer (clean text, CJK split)");
    if (lc && !json_is_boolean(lc)) return cf_fail(err, TJ ": field normalizer.lowercase: not a boolean");
    if (sa && !json_is_null(sa) && !json_is_boolean(sa))
        return cf_fail(err, TJ ": field normalizer.strip_accents: not a boolean or null");
    *lower = !lc || json_is_true(lc); /* BertNormalizer's default: lowercase */
    *strip = json_is_boolean(sa) ? json_is_true(sa) : *lower;
    if (!is_str(json_object_get(tj, "pre_tokenizer"), "type", "BertPreTokenizer"))
        return cf_fail(err, TJ ": field pre_tokenizer: WordPiece needs BertPreTokenizer");
    if (!is_str(model, "continuing_subword_prefix", "##"))
        return cf_fail(err, TJ ": field model.continuing_subword_prefix: only \"##\" is supported");
    return 0;
}

int hf_tok_wordpiece(json_t *tj, int64_t vocab_size, gguf_writer *w, hf_vocab *v, cf_err *err) {
    json_t *model = json_object_get(tj, "model");
    bool lower = true, strip = true;
    if (check_bert(tj, model, &lower, &strip, err) ||
        hf_vocab_collect(json_object_get(model, "vocab"), json_object_get(tj, "added_tokens"), v, err) ||
        set_unk(v, json_string_value(json_object_get(model, "unk_token")), w, err))
        return -1;
    for (int64_t i = 0; i < v->n; i++) {
        char *s = v->text[i];
        size_t n = strlen(s);
        if (v->type[i] != TOK_NORMAL || (n >= 2 && s[0] == '[' && s[n - 1] == ']')) continue;
        if (!strncmp(s, "##", 2)) {
            memmove(s, s + 2, n - 1);
            continue;
        }
        char *p = malloc(n + sizeof SPACE_MARK);
        if (!p) return cf_fail(err, TJ ": out of memory");
        memcpy(p, SPACE_MARK, sizeof SPACE_MARK - 1);
        memcpy(p + sizeof SPACE_MARK - 1, s, n + 1);
        free(s);
        v->text[i] = p;
    }
    if (hf_vocab_write(v, vocab_size, w, err) || hf_tok_write_post(tj, v, true, w, err)) return -1;
    gguf_set_str(w, "tokenizer.ggml.model", "bert");
    gguf_set_bool(w, "tokenizer.hf.bert_lowercase", lower);
    gguf_set_bool(w, "tokenizer.hf.bert_strip_accents", strip);
    return 0;
}
