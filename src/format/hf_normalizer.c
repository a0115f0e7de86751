/* hf_normalizer.c - tokenizer.json's SentencePiece normalizer (Unigram models
 * of the T5 / XLM-R kind) as GGUF keys.
 *
 * Accepted forms of "normalizer": Precompiled alone, or a Sequence of
 * Precompiled, then optionally Strip (right only), then optionally
 * Replace(Regex " {2,}", content) - what transformers' SentencePiece
 * converters write. The base64 precompiled_charsmap is decoded into
 * tokenizer.ggml.precompiled_charsmap (u8 array, llama.cpp's key; only its
 * header is checked here, text/charsmap.c validates the rest at load), with
 * tokenizer.hf.charsmap_per_grapheme (tokenizers' per-grapheme rule),
 * tokenizer.hf.normalizer_strip_right and
 * tokenizer.hf.normalizer_collapse_spaces (the Replace content). Anything
 * else in such a Sequence is refused naming the field. */
#include <stdlib.h>
#include <string.h>

#include "format/hf_internal.h"

#define TJ "tokenizer.json"

static bool is_type(json_t *o, const char *type) {
    const char *t = json_string_value(json_object_get(o, "type"));
    return t && !strcmp(t, type);
}

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 with padding; NULL when malformed (*n = 0) or out of memory (*n = 1). */
static uint8_t *b64_decode(const char *s, size_t len, size_t *n) {
    *n = 0;
    if (len % 4) return NULL;
    uint8_t *out = malloc(len / 4 * 3 + 1);
    if (!out) return *n = 1, NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            bool last = i + 4 == len;
            if (last && s[i + k] == '=' && k >= 2 && (k == 3 || s[i + 3] == '=')) {
                v[k] = 0, pad++;
                continue;
            }
            if ((v[k] = b64_value((unsigned char)s[i + k])) < 0) {
                free(out);
                return NULL;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2) out[o++] = (uint8_t)(w >> 8);
        if (pad < 1) out[o++] = (uint8_t)w;
    }
    *n = o;
    return out;
}

static int write_charsmap(json_t *pre, gguf_writer *w, cf_err *err) {
    const char *b64 = json_string_value(json_object_get(pre, "precompiled_charsmap"));
    if (!b64) return cf_fail(err, TJ ": field normalizer.precompiled_charsmap: missing or not a string");
    size_t n;
    uint8_t *blob = b64_decode(b64, strlen(b64), &n);
    if (!blob)
        return n ? cf_fail(err, TJ ": out of memory")
                 : cf_fail(err, TJ ": field normalizer.precompiled_charsmap: not base64");
    size_t trie = n >= 4 ? (size_t)blob[0] | (size_t)blob[1] << 8 | (size_t)blob[2] << 16 | (size_t)blob[3] << 24 : 0;
    if (n < 4 || trie == 0 || trie % 4 || trie > n - 4) {
        free(blob);
        return cf_fail(err, TJ ": field normalizer.precompiled_charsmap: trie size outside the %zu-byte blob", n);
    }
    gguf_set_arr_u8(w, "tokenizer.ggml.precompiled_charsmap", blob, n);
    gguf_set_bool(w, "tokenizer.hf.charsmap_per_grapheme", true);
    free(blob);
    return 0;
}

/* Replace(Regex(" {2,}"), content): the content, or NULL (error set). */
static const char *collapse_content(json_t *rep, size_t i, cf_err *err) {
    const char *re = json_string_value(json_object_get(json_object_get(rep, "pattern"), "Regex"));
    const char *content = json_string_value(json_object_get(rep, "content"));
    if (!re || strcmp(re, " {2,}") || !content)
        return cf_fail(err,
                       TJ ": field normalizer.normalizers[%zu]: only Replace(Regex \" {2,}\") may follow "
                          "Precompiled",
                       i),
               NULL;
    return content;
}

bool hf_tok_has_precompiled(json_t *tj) {
    json_t *norm = json_object_get(tj, "normalizer");
    return is_type(norm, "Precompiled") ||
           (is_type(norm, "Sequence") &&
            is_type(json_array_get(json_object_get(norm, "normalizers"), 0), "Precompiled"));
}

int hf_tok_precompiled(json_t *tj, gguf_writer *w, cf_err *err) {
    json_t *norm = json_object_get(tj, "normalizer");
    if (is_type(norm, "Precompiled")) return write_charsmap(norm, w, err);
    json_t *list = json_object_get(norm, "normalizers");
    if (write_charsmap(json_array_get(list, 0), w, err)) return -1;
    size_t i = 1, n = json_array_size(list);
    json_t *e = json_array_get(list, i);
    if (i < n && is_type(e, "Strip")) {
        if (json_is_true(json_object_get(e, "strip_left")) || !json_is_true(json_object_get(e, "strip_right")))
            return cf_fail(err, TJ ": field normalizer.normalizers[%zu]: only Strip(right) is supported", i);
        gguf_set_bool(w, "tokenizer.hf.normalizer_strip_right", true);
        e = json_array_get(list, ++i);
    }
    if (i < n) {
        const char *content = is_type(e, "Replace") ? collapse_content(e, i, err) : NULL;
        if (!content)
            return is_type(e, "Replace") ? -1
                                         : cf_fail(err,
                                                   TJ ": field normalizer.normalizers[%zu]: after Precompiled only "
                                                      "Strip(right) and Replace(\" {2,}\") are supported",
                                                   i);
        gguf_set_str(w, "tokenizer.hf.normalizer_collapse_spaces", content);
        i++;
    }
    if (i < n) return cf_fail(err, TJ ": field normalizer.normalizers[%zu]: not supported after Precompiled", i);
    return 0;
}
