/* charset.c - code point sets and their UTF-8 byte-level rules (see charset.h). The UTF-8
 * translation splits each range until every byte position is a contiguous byte range (the
 * classic range-splitting construction), then emits one production per byte-range sequence;
 * single-byte ranges are merged into one terminal class. */
#include "grammar/charset.h"

#include <stdlib.h>
#include <string.h>

int gr_charset_add(gr_charset *s, uint32_t lo, uint32_t hi) {
    if (lo > hi) return 0;
    if (hi > GR_MAX_CODEPOINT) hi = GR_MAX_CODEPOINT;
    if (lo > GR_MAX_CODEPOINT) return 0;
    if (s->n == s->cap) {
        uint32_t n = s->cap ? s->cap * 2 : 8;
        gr_range *r = realloc(s->r, (size_t)n * sizeof *r);
        if (!r) return -1;
        s->r = r;
        s->cap = n;
    }
    s->r[s->n++] = (gr_range){lo, hi};
    return 0;
}

int gr_charset_add_set(gr_charset *s, const gr_charset *o) {
    for (uint32_t i = 0; i < o->n; i++)
        if (gr_charset_add(s, o->r[i].lo, o->r[i].hi)) return -1;
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const gr_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : (x->lo > y->lo);
}

void gr_charset_normalize(gr_charset *s) {
    if (s->n < 2) return;
    qsort(s->r, s->n, sizeof *s->r, cmp_range);
    uint32_t k = 0;
    for (uint32_t i = 1; i < s->n; i++) {
        if (s->r[i].lo <= s->r[k].hi + 1) {
            if (s->r[i].hi > s->r[k].hi) s->r[k].hi = s->r[i].hi;
        } else {
            s->r[++k] = s->r[i];
        }
    }
    s->n = k + 1;
}

int gr_charset_negate(gr_charset *s) {
    gr_charset_normalize(s);
    gr_charset out = {0};
    uint32_t next = 0;
    int rc = 0;
    for (uint32_t i = 0; i < s->n && !rc; i++) {
        if (s->r[i].lo > next) rc = gr_charset_add(&out, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (!rc && next <= GR_MAX_CODEPOINT) rc = gr_charset_add(&out, next, GR_MAX_CODEPOINT);
    free(s->r);
    *s = out;
    return rc;
}

void gr_charset_free(gr_charset *s) {
    free(s->r);
    memset(s, 0, sizeof *s);
}

int gr_charset_has(const gr_charset *s, uint32_t c) {
    for (uint32_t i = 0; i < s->n; i++)
        if (c >= s->r[i].lo && c <= s->r[i].hi) return 1;
    return 0;
}

int gr_utf8_encode(uint32_t c, uint8_t out[4]) {
    if (c < 0x80) {
        out[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (uint8_t)(0xC0 | c >> 6);
        out[1] = (uint8_t)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (uint8_t)(0xE0 | c >> 12);
        out[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | c >> 18);
    out[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

int32_t gr_utf8_decode(const uint8_t **p, const uint8_t *end) {
    const uint8_t *s = *p;
    if (s >= end) return -1;
    uint32_t c = s[0];
    int n;
    if (c < 0x80) n = 1;
    else if (c >= 0xC2 && c <= 0xDF) n = 2, c &= 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, c &= 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, c &= 0x07;
    else return -1;
    if (end - s < n) return -1;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        c = c << 6 | (s[i] & 0x3F);
    }
    if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > GR_MAX_CODEPOINT)) || (c >= 0xD800 && c <= 0xDFFF))
        return -1;
    *p = s + n;
    return (int32_t)c;
}

typedef struct emitter {
    gr_cfg *g;
    int32_t nt;
    gr_class ascii; /* single-byte code points, merged into one terminal */
} emitter;

/* Emits [lo, hi] where both encode to the same length, splitting until each byte position is one
 * contiguous range. */
static int emit_same_len(emitter *em, uint32_t lo, uint32_t hi) {
    uint8_t a[4], b[4];
    int n = gr_utf8_encode(lo, a);
    if (n == 1) {
        gr_class_set_range(&em->ascii, lo, hi);
        return 0;
    }
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) return emit_same_len(em, lo, lo | m) || emit_same_len(em, (lo | m) + 1, hi) ? -1 : 0;
            if ((hi & m) != m) return emit_same_len(em, lo, (hi & ~m) - 1) || emit_same_len(em, hi & ~m, hi) ? -1 : 0;
        }
    }
    gr_utf8_encode(hi, b);
    int32_t syms[4];
    for (int i = 0; i < n; i++)
        if (!(syms[i] = gr_term_range(em->g, a[i], b[i]))) return -1;
    return gr_prod_add(em->g, em->nt, syms, (uint32_t)n);
}

static int emit_range(emitter *em, uint32_t lo, uint32_t hi) {
    static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF, GR_MAX_CODEPOINT};
    if (lo <= 0xDFFF && hi >= 0xD800) { /* skip surrogates */
        if (lo < 0xD800 && emit_range(em, lo, 0xD7FF)) return -1;
        return hi > 0xDFFF ? emit_range(em, 0xE000, hi) : 0;
    }
    for (int i = 0; i < 4; i++) {
        uint32_t top = bounds[i];
        if (lo > top) continue;
        if (hi <= top) return emit_same_len(em, lo, hi);
        if (emit_same_len(em, lo, top)) return -1;
        lo = top + 1;
    }
    return 0;
}

int32_t gr_charset_utf8(gr_cfg *g, const gr_charset *s) {
    emitter em = {.g = g, .nt = gr_nt(g)};
    if (em.nt < 0) return -1;
    for (uint32_t i = 0; i < s->n; i++)
        if (emit_range(&em, s->r[i].lo, s->r[i].hi)) return -1;
    int empty = !(em.ascii.bits[0] | em.ascii.bits[1]);
    if (!empty) {
        int32_t t = gr_term(g, &em.ascii);
        if (!t || gr_prod_add(g, em.nt, &t, 1)) return -1;
    }
    return em.nt;
}

/* The JSON escape of control character / quote / backslash c as rules added to nt. */
static int add_json_escape(gr_cfg *g, int32_t nt, uint32_t c) {
    static const char short_esc[][2] = {{'"', '"'},  {'\\', '\\'}, {'\b', 'b'}, {'\f', 'f'},
                                        {'\n', 'n'}, {'\r', 'r'},  {'\t', 't'}};
    int32_t bs = gr_term_byte(g, '\\');
    for (size_t i = 0; i < sizeof short_esc / sizeof *short_esc; i++)
        if ((uint32_t)(uint8_t)short_esc[i][0] == c) {
            int32_t syms[2] = {bs, gr_term_byte(g, (uint8_t)short_esc[i][1])};
            if (gr_prod_add(g, nt, syms, 2)) return -1;
        }
    if (c >= 0x20) return 0;
    static const char hex_lo[] = "0123456789abcdef", hex_up[] = "0123456789ABCDEF";
    gr_class last = {{0}};
    gr_class_set(&last, (uint8_t)hex_lo[c & 15]);
    gr_class_set(&last, (uint8_t)hex_up[c & 15]);
    int32_t syms[6] = {bs,
                       gr_term_byte(g, 'u'),
                       gr_term_byte(g, '0'),
                       gr_term_byte(g, '0'),
                       gr_term_byte(g, (uint8_t)('0' + (c >> 4))),
                       gr_term(g, &last)};
    return gr_prod_add(g, nt, syms, 6);
}

int32_t gr_charset_json(gr_cfg *g, const gr_charset *s) {
    gr_charset plain = {0};
    int rc = gr_charset_add_set(&plain, s);
    gr_charset special = {0};
    rc = rc || gr_charset_add(&special, 0, 0x1F) || gr_charset_add(&special, '"', '"') ||
         gr_charset_add(&special, '\\', '\\') || gr_charset_negate(&special);
    /* plain = s minus special: intersect s with the complement of the special set */
    gr_charset inter = {0};
    gr_charset_normalize(&plain);
    for (uint32_t i = 0; !rc && i < plain.n; i++)
        for (uint32_t j = 0; !rc && j < special.n; j++) {
            uint32_t lo = plain.r[i].lo > special.r[j].lo ? plain.r[i].lo : special.r[j].lo;
            uint32_t hi = plain.r[i].hi < special.r[j].hi ? plain.r[i].hi : special.r[j].hi;
            if (lo <= hi) rc = gr_charset_add(&inter, lo, hi);
        }
    int32_t nt = rc ? -1 : gr_charset_utf8(g, &inter);
    for (uint32_t c = 0; nt >= 0 && c <= '\\'; c++)
        if ((c < 0x20 || c == '"' || c == '\\') && gr_charset_has(&plain, c) && add_json_escape(g, nt, c)) nt = -1;
    gr_charset_free(&plain);
    gr_charset_free(&special);
    gr_charset_free(&inter);
    return nt;
}
