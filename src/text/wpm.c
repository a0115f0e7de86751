/* wpm.c - WordPiece encoding (tokenizer.ggml.model = "bert"), as llama.cpp's
 * llm_tokenizer_wpm.
 *
 * GGUF BERT vocabularies spell word-initial pieces with a leading "▁" and
 * continuation pieces bare (the converter turned "##ing" into "ing" and
 * "hello" into "▁hello"). For one raw fragment:
 *  1. BERT basic pre-tokenization over code points: each one is replaced by
 *     the first code point of its NFD decomposition (strips accents; unless
 *     t->bert_strip_accents is false), then whitespace ends the current word;
 *     NUL, U+FFFD and control characters (Cc Cf Cs Co) are dropped; the rest
 *     is lowercased (unless t->bert_lowercase is false); punctuation, ASCII
 *     symbols and CJK ideographs become one-character words of their own.
 *     Invalid UTF-8 bytes count as U+FFFD (dropped).
 *  2. Each word, with "▁" put in front, is covered greedily left to right
 *     by the longest vocabulary token at each position; if some position
 *     has no token the whole word becomes [UNK] (t->unk; nothing if none).
 * Decoding (tokenizer.c): "▁" -> ' ', continuation pieces glue on (as
 * llama.cpp's token_to_piece), so the text comes back lowercased with single
 * spaces and a leading space that the detokenizer strips
 * (strip_leading_space). llama_detokenize's whole-text clean_spaces pass
 * (" ," -> ",", " ' " -> "'") is not applied: the detokenizer streams.
 * Memory: one word buffer per call, freed before returning. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/unicode_tables.h"
#include "text/utf8.h"

#define WORD_PREFIX "\xE2\x96\x81" /* U+2581 */

/* Decodes one code point at s[*i] (well-formed only; else U+FFFD, one byte). */
static uint32_t next_cp(const unsigned char *s, size_t len, size_t *i) {
    unsigned char c = s[*i];
    size_t n = utf8_seq_len(c);
    if (n == 0 || *i + n > len) {
        (*i)++;
        return 0xFFFD;
    }
    for (size_t k = 1; k < n; k++)
        if (!utf8_cont_ok(c, k, s[*i + k])) {
            (*i)++;
            return 0xFFFD;
        }
    uint32_t cp = n == 1 ? c : (uint32_t)(c & (0x7F >> n));
    for (size_t k = 1; k < n; k++) cp = (cp << 6) | (s[*i + k] & 0x3F);
    *i += n;
    return cp;
}

static size_t put_cp(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static bool is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Greedy longest-match of "▁" + word (w[0..n), prefix included). */
static int encode_word(const tokenizer *t, const char *w, size_t n, tok_idvec *out) {
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = i + t->max_token_len < n ? i + t->max_token_len : n;
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = tok_lookup(t, w + i, j - i)) >= 0) break;
        if (id < 0) { /* no piece fits here: the whole word is unknown */
            out->n = start;
            break;
        }
        if (tok_idvec_push(out, id) != 0) return -1;
        i = j;
    }
    if (out->n == start && t->unk >= 0) return tok_idvec_push(out, t->unk);
    return 0;
}

/* Ends the word being built in w[0..*n) (if any) by encoding it. */
static int flush_word(const tokenizer *t, char *w, size_t *n, tok_idvec *out) {
    size_t pre = sizeof WORD_PREFIX - 1;
    int rc = *n > pre ? encode_word(t, w, *n, out) : 0;
    *n = pre;
    return rc;
}

int wpm_encode(const tokenizer *t, const char *text, size_t len, tok_idvec *out, cf_err *err) {
    /* a word is at most the prefix plus the lowercased text: each code
     * point of <= 4 bytes becomes one of <= 4 bytes */
    char *w = malloc(len * 4 + 8);
    if (!w) return cf_fail(err, "tokenize: out of memory");
    const size_t pre = sizeof WORD_PREFIX - 1;
    memcpy(w, WORD_PREFIX, pre);
    size_t n = pre, i = 0;
    const unsigned char *s = (const unsigned char *)text;
    int rc = 0;
    while (i < len && rc == 0) {
        uint32_t cp = next_cp(s, len, &i);
        if (t->bert_strip_accents) cp = uni_nfd_base(cp);
        if (is_space(cp)) {
            rc = flush_word(t, w, &n, out);
            continue;
        }
        int fl = uni_cat_flags(cp);
        if (cp == 0 || cp == 0xFFFD || (fl & UNI_CONTROL)) continue;
        if (t->bert_lowercase) cp = uni_tolower(cp);
        if ((fl & UNI_PUNCT) || (cp < 0x7F && (fl & UNI_SYMBOL)) || is_cjk(cp)) {
            rc = flush_word(t, w, &n, out);
            n += put_cp(w + n, cp);
            if (rc == 0) rc = flush_word(t, w, &n, out);
        } else {
            n += put_cp(w + n, cp);
        }
    }
    if (rc == 0) rc = flush_word(t, w, &n, out);
    free(w);
    return rc == 0 ? 0 : cf_fail(err, "tokenize: out of memory");
}
