/* charsmap.c - SentencePiece's precompiled normalizer (see charsmap.h): the
 * double-array trie walk, tokenizers' per-grapheme replacement rule, and the
 * Strip / space-collapse steps that follow it in real tokenizer.json files. */
#include "text/charsmap.h"

#include <stdlib.h>
#include <string.h>

#include "text/grapheme.h"
#include "text/utf8.h"

struct charsmap {
    uint32_t *units; /* the trie */
    size_t n_units;
    char *repl; /* NUL-terminated replacement strings */
    size_t repl_len;
    char *collapse; /* NULL: no space collapsing */
    bool strip_right;
};

void charsmap_free(charsmap *m) {
    if (!m) return;
    free(m->units);
    free(m->repl);
    free(m->collapse);
    free(m);
}

int charsmap_load(const uint8_t *blob, size_t n, const char *collapse, bool strip_right, charsmap **out, cf_err *err) {
    *out = NULL;
    if (n < 4) return cf_fail(err, "precompiled charsmap: %zu bytes, shorter than its 4-byte header", n);
    size_t trie = (size_t)blob[0] | (size_t)blob[1] << 8 | (size_t)blob[2] << 16 | (size_t)blob[3] << 24;
    if (trie % 4 || trie == 0 || trie > n - 4)
        return cf_fail(err, "precompiled charsmap: trie size %zu is not a positive multiple of 4 within %zu bytes",
                       trie, n - 4);
    size_t repl_len = n - 4 - trie;
    if (!utf8_valid((const char *)blob + 4 + trie, repl_len))
        return cf_fail(err, "precompiled charsmap: the replacement strings are not UTF-8");
    charsmap *m = calloc(1, sizeof *m);
    if (!m) return cf_fail(err, "tokenizer: out of memory");
    m->n_units = trie / 4;
    m->units = malloc(trie);
    m->repl = malloc(repl_len + 1);
    m->strip_right = strip_right;
    if (collapse) m->collapse = strdup(collapse);
    if (!m->units || !m->repl || (collapse && !m->collapse)) {
        charsmap_free(m);
        return cf_fail(err, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < m->n_units; i++) {
        const uint8_t *u = blob + 4 + 4 * i;
        m->units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    memcpy(m->repl, blob + 4 + trie, repl_len);
    m->repl[repl_len] = 0;
    m->repl_len = repl_len;
    *out = m;
    return 0;
}

/* darts-clone unit fields */
static bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & 0x7FFFFFFFu; }
static uint32_t unit_label(uint32_t u) { return u & (0x80000000u | 0xFFu); }
static size_t unit_offset(uint32_t u) { return (size_t)(u >> 10) << ((u & (1u << 9)) >> 6); }

/* The value of the shortest prefix of key[0..n) that is a key, or -1. */
static int64_t shortest_prefix(const charsmap *m, const unsigned char *key, size_t n) {
    size_t pos = unit_offset(m->units[0]);
    for (size_t i = 0; i < n && key[i]; i++) {
        pos ^= key[i];
        if (pos >= m->n_units) return -1;
        uint32_t u = m->units[pos];
        if (unit_label(u) != key[i]) return -1;
        pos ^= unit_offset(u);
        if (unit_has_leaf(u)) return pos < m->n_units ? (int64_t)unit_value(m->units[pos]) : -1;
    }
    return -1;
}

/* The replacement of key[0..n) (its shortest key prefix), or NULL. */
static const char *replacement(const charsmap *m, const unsigned char *key, size_t n, size_t *rlen) {
    int64_t v = shortest_prefix(m, key, n);
    if (v < 0 || (size_t)v >= m->repl_len) return NULL;
    *rlen = strlen(m->repl + v);
    return m->repl + v;
}

static int put(char **buf, size_t *cap, size_t *n, const char *s, size_t len) {
    if (*n + len + 1 > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < *n + len + 1) c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return -1;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *n, s, len);
    *n += len;
    return 0;
}

/* One grapheme cluster g[0..n): whole (under 6 bytes) or code point by code point. */
static int normalize_cluster(const charsmap *m, const unsigned char *g, size_t n, char **buf, size_t *cap, size_t *o) {
    size_t rl;
    const char *r = n < 6 ? replacement(m, g, n, &rl) : NULL;
    if (r) return put(buf, cap, o, r, rl);
    for (size_t i = 0; i < n;) {
        size_t cl = utf8_seq_len(g[i]);
        if (cl == 0 || i + cl > n) cl = 1;
        r = replacement(m, g + i, cl, &rl);
        if (put(buf, cap, o, r ? r : (const char *)g + i, r ? rl : cl) != 0) return -1;
        i += cl;
    }
    return 0;
}

/* Rust's char::is_whitespace (Unicode White_Space) */
static size_t trailing_space(const char *s, size_t n) {
    static const char *const ws[] = {"\xC2\x85",     "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\xA8",
                                     "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
    size_t end = n;
    for (;;) {
        if (end && ((s[end - 1] >= 9 && s[end - 1] <= 13) || s[end - 1] == ' ')) {
            end--;
            continue;
        }
        bool hit = false;
        for (size_t k = 0; !hit && k < sizeof ws / sizeof ws[0]; k++) {
            size_t l = strlen(ws[k]);
            hit = end >= l && !memcmp(s + end - l, ws[k], l);
            if (hit) end -= l;
        }
        if (!hit && end >= 3 && !memcmp(s + end - 3, "\xE2\x80", 2) && (unsigned char)s[end - 1] >= 0x80 &&
            (unsigned char)s[end - 1] <= 0x8A) /* U+2000..U+200A */
            end -= 3, hit = true;
        if (!hit) return n - end;
    }
}

/* Replace(Regex(" {2,}"), collapse) in place over buf[0..*n), into a fresh copy. */
static int collapse_spaces(const charsmap *m, char **buf, size_t *cap, size_t *n) {
    size_t cl = strlen(m->collapse), o = 0, cap2 = 0;
    char *out = NULL;
    for (size_t i = 0; i < *n;) {
        size_t run = 0;
        while (i + run < *n && (*buf)[i + run] == ' ') run++;
        int rc = run >= 2 ? put(&out, &cap2, &o, m->collapse, cl) : put(&out, &cap2, &o, *buf + i, run ? run : 1);
        if (rc != 0) {
            free(out);
            return -1;
        }
        i += run ? run : 1;
    }
    free(*buf);
    *buf = out;
    *cap = cap2;
    *n = o;
    return 0;
}

int charsmap_normalize(const charsmap *m, const char *text, size_t len, char **buf, size_t *cap, size_t *out_len) {
    const unsigned char *s = (const unsigned char *)text;
    size_t o = 0;
    if (put(buf, cap, &o, "", 0) != 0) return -1;
    for (size_t i = 0; i < len;) {
        size_t e = grapheme_end(s, len, i);
        if (normalize_cluster(m, s + i, e - i, buf, cap, &o) != 0) return -1;
        i = e;
    }
    if (m->strip_right) o -= trailing_space(*buf, o);
    if (m->collapse && o && collapse_spaces(m, buf, cap, &o) != 0) return -1;
    *out_len = o;
    return 0;
}
