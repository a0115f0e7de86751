/* json_rules.c - CFG rules for JSON text (see json_rules.h). Integer ranges use the classic
 * digit-string construction: split [lo, hi] by digit count, then by the first differing digit,
 * leaving fixed-length ranges over digit strings; multiples of k are the left-linear grammar of
 * the "remainder mod k" automaton. Strings are canonical where the schema constrains them. */
#include "grammar/json_rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/charset.h"

void js_rules_init(js_rules *r, gr_cfg *g, int compact) {
    memset(r, 0, sizeof *r);
    r->g = g;
    r->compact = compact;
    r->ws = r->any = r->string = r->chr = r->number = r->digits = r->frac_exp = -1;
    r->str_rest = r->non_ascii = r->escapes = -1;
}

int32_t js_lit(js_rules *r, const char *s) { return gr_literal(r->g, (const uint8_t *)s, strlen(s)); }

int32_t js_ws(js_rules *r) {
    if (r->ws >= 0) return r->ws;
    gr_cfg *g = r->g;
    if (r->compact) {
        r->ws = gr_nt(g);
        if (r->ws >= 0 && gr_prod_add(g, r->ws, NULL, 0)) r->ws = -1;
        return r->ws;
    }
    /* optional: a single space, or a newline followed by up to 20 spaces/tabs (pretty printing),
     * bounded so a model cannot loop on whitespace */
    gr_class ind = {{0}};
    gr_class_set(&ind, ' ');
    gr_class_set(&ind, '\t');
    int32_t indent = gr_repeat(g, gr_term(g, &ind), 0, 20);
    int32_t nl[2] = {gr_term_byte(g, '\n'), indent};
    int32_t sp = gr_term_byte(g, ' ');
    int32_t nt = gr_nt(g);
    if (indent < 0 || nt < 0 || gr_prod_add(g, nt, NULL, 0) || gr_prod_add(g, nt, &sp, 1) || gr_prod_add(g, nt, nl, 2))
        return -1;
    return r->ws = nt;
}

int32_t js_char(js_rules *r) {
    if (r->chr >= 0) return r->chr;
    gr_cfg *g = r->g;
    gr_charset plain = {0};
    if (gr_charset_add(&plain, 0x20, GR_MAX_CODEPOINT)) return -1;
    int32_t nt = gr_charset_json(g, &plain); /* printable chars, \" and \\ */
    gr_charset_free(&plain);
    if (nt < 0) return -1;
    gr_class esc = {{0}}, hex = {{0}};
    for (const char *p = "/bfnrt"; *p; p++) gr_class_set(&esc, (uint8_t)*p);
    gr_class_set_range(&hex, '0', '9');
    gr_class_set_range(&hex, 'a', 'f');
    gr_class_set_range(&hex, 'A', 'F');
    int32_t bs = gr_term_byte(g, '\\'), h = gr_term(g, &hex);
    int32_t e1[2] = {bs, gr_term(g, &esc)};
    int32_t e2[6] = {bs, gr_term_byte(g, 'u'), h, h, h, h};
    if (gr_prod_add(g, nt, e1, 2) || gr_prod_add(g, nt, e2, 6)) return -1;
    return r->chr = nt;
}

int32_t js_string(js_rules *r) {
    if (r->string >= 0) return r->string;
    int32_t c = js_char(r), body = c < 0 ? -1 : gr_star(r->g, c), q = gr_term_byte(r->g, '"');
    if (body < 0) return -1;
    int32_t syms[3] = {q, body, q};
    return r->string = gr_seq(r->g, syms, 3);
}

int32_t js_string_len(js_rules *r, uint32_t min, int64_t max) {
    for (uint32_t i = 0; i < r->n_lens; i++)
        if (r->lens[i].min == min && r->lens[i].max == max) return r->lens[i].nt;
    int32_t c = js_char(r), body = c < 0 ? -1 : gr_repeat(r->g, c, min, max), q = gr_term_byte(r->g, '"');
    if (body < 0) return -1;
    int32_t syms[3] = {q, body, q};
    int32_t nt = gr_seq(r->g, syms, 3);
    if (nt >= 0 && r->n_lens < JS_LEN_MEMO) {
        r->lens[r->n_lens].min = min;
        r->lens[r->n_lens].max = max;
        r->lens[r->n_lens++].nt = nt;
    }
    return nt;
}

static int32_t digits(js_rules *r) {
    if (r->digits < 0) r->digits = gr_plus(r->g, gr_term_range(r->g, '0', '9'));
    return r->digits;
}

static int32_t frac_exp(js_rules *r) {
    if (r->frac_exp >= 0) return r->frac_exp;
    gr_cfg *g = r->g;
    int32_t d = digits(r);
    int32_t fr[2] = {gr_term_byte(g, '.'), d};
    int32_t frac = gr_opt(g, gr_seq(g, fr, 2));
    gr_class e = {{0}}, s = {{0}};
    gr_class_set(&e, 'e');
    gr_class_set(&e, 'E');
    gr_class_set(&s, '+');
    gr_class_set(&s, '-');
    int32_t ex[3] = {gr_term(g, &e), gr_opt(g, gr_term(g, &s)), d};
    int32_t exp = gr_opt(g, gr_seq(g, ex, 3));
    int32_t both[2] = {frac, exp};
    return r->frac_exp = gr_seq(g, both, 2);
}

int32_t js_number(js_rules *r) {
    if (r->number >= 0) return r->number;
    int32_t i = js_int_range(r, 0, 0, 0, 0), fe = frac_exp(r);
    int32_t syms[2] = {i, fe};
    return r->number = gr_seq(r->g, syms, 2);
}

/* Digit strings of length len (leading zeros allowed) in [a, b], a/b given as digit strings. */
static int32_t fixed_range(gr_cfg *g, const char *a, const char *b, size_t len) {
    int32_t nt = gr_nt(g);
    if (nt < 0) return -1;
    if (len == 0) return gr_prod_add(g, nt, NULL, 0) ? -1 : nt;
    if (a[0] == b[0]) {
        int32_t rest = fixed_range(g, a + 1, b + 1, len - 1);
        int32_t syms[2] = {gr_term_byte(g, (uint8_t)a[0]), rest};
        return rest < 0 || gr_prod_add(g, nt, syms, 2) ? -1 : nt;
    }
    /* a[0] < b[0] */
    char nines[24], zeros[24];
    memset(nines, '9', len);
    memset(zeros, '0', len);
    int32_t lo_rest = fixed_range(g, a + 1, nines, len - 1);
    int32_t hi_rest = fixed_range(g, zeros, b + 1, len - 1);
    int32_t s1[2] = {gr_term_byte(g, (uint8_t)a[0]), lo_rest}, s3[2] = {gr_term_byte(g, (uint8_t)b[0]), hi_rest};
    if (lo_rest < 0 || hi_rest < 0 || gr_prod_add(g, nt, s1, 2) || gr_prod_add(g, nt, s3, 2)) return -1;
    if (b[0] - a[0] >= 2) {
        int32_t mid = gr_repeat(g, gr_term_range(g, '0', '9'), (uint32_t)len - 1, (int64_t)len - 1);
        int32_t s2[2] = {gr_term_range(g, (uint8_t)(a[0] + 1), (uint8_t)(b[0] - 1)), mid};
        if (mid < 0 || gr_prod_add(g, nt, s2, 2)) return -1;
    }
    return nt;
}

/* Canonical non-negative integers in [lo, hi]; hi < 0: unbounded. Adds the productions to nt. */
static int add_nonneg_range(gr_cfg *g, int32_t nt, uint64_t lo, int64_t hi) {
    char a[24], b[24];
    uint64_t first = 0, last = 9; /* the numbers with `len` digits */
    for (int len = 1; len <= 19; len++, first = first ? first * 10 : 10, last = last * 10 + 9) {
        if (hi >= 0 && first > (uint64_t)hi) return 0;
        if (last < lo) continue;
        if (hi < 0 && first >= lo && len > 1) { /* every number with >= len digits */
            int32_t more = gr_repeat(g, gr_term_range(g, '0', '9'), (uint32_t)len - 1, -1);
            int32_t syms[2] = {gr_term_range(g, '1', '9'), more};
            return more < 0 || gr_prod_add(g, nt, syms, 2) ? -1 : 0;
        }
        uint64_t from = lo > first ? lo : first, to = hi >= 0 && (uint64_t)hi < last ? (uint64_t)hi : last;
        snprintf(a, sizeof a, "%0*llu", len, (unsigned long long)from);
        snprintf(b, sizeof b, "%0*llu", len, (unsigned long long)to);
        int32_t sub = fixed_range(g, a, b, (size_t)len);
        if (sub < 0 || gr_prod_add(g, nt, &sub, 1)) return -1;
    }
    if (hi >= 0) return 0;
    /* numbers of 20 or more digits (all above 10^19 > lo) */
    int32_t more = gr_repeat(g, gr_term_range(g, '0', '9'), 19, -1);
    int32_t syms[2] = {gr_term_range(g, '1', '9'), more};
    return more < 0 || gr_prod_add(g, nt, syms, 2) ? -1 : 0;
}

int32_t js_int_range(js_rules *r, int has_lo, int64_t lo, int has_hi, int64_t hi) {
    gr_cfg *g = r->g;
    int32_t nt = gr_nt(g);
    if (nt < 0) return -1;
    if (has_lo && has_hi && lo > hi) return nt; /* empty */
    /* non-negative part: [max(0, lo), hi] */
    if (!has_hi || hi >= 0) {
        uint64_t from = has_lo && lo > 0 ? (uint64_t)lo : 0;
        if (add_nonneg_range(g, nt, from, has_hi ? hi : -1)) return -1;
    }
    /* negative part: -(m) for m in [max(1, -hi), -lo] */
    if (!has_lo || lo < 0) {
        uint64_t from = has_hi && hi < 0 ? (uint64_t)(-(hi + 1)) + 1 : 1;
        int64_t to = has_lo ? (int64_t)((uint64_t)(-(lo + 1)) + 1) : -1;
        if (has_lo && lo == INT64_MIN) to = INT64_MAX;
        int32_t mag = gr_nt(g);
        int32_t syms[2] = {gr_term_byte(g, '-'), mag};
        if (mag < 0 || add_nonneg_range(g, mag, from, to) || gr_prod_add(g, nt, syms, 2)) return -1;
    }
    return nt;
}

int32_t js_int_multiple(js_rules *r, uint64_t k) {
    gr_cfg *g = r->g;
    if (k > 100000) return -1;
    int32_t *rem = malloc(k * sizeof *rem); /* rem[x]: digit strings (no leading zero) = x mod k */
    if (!rem) return -1;
    int32_t out = -1;
    for (uint64_t x = 0; x < k; x++)
        if ((rem[x] = gr_nt(g)) < 0) goto done;
    for (uint8_t d = 1; d <= 9; d++) {
        int32_t t = gr_term_byte(g, (uint8_t)('0' + d));
        if (gr_prod_add(g, rem[d % k], &t, 1)) goto done;
    }
    for (uint64_t x = 0; x < k; x++)
        for (uint8_t d = 0; d <= 9; d++) {
            int32_t syms[2] = {rem[x], gr_term_byte(g, (uint8_t)('0' + d))};
            if (gr_prod_add(g, rem[(x * 10 + d) % k], syms, 2)) goto done;
        }
    int32_t zero = gr_term_byte(g, '0');
    int32_t neg[2] = {gr_term_byte(g, '-'), rem[0]};
    out = gr_nt(g);
    if (out < 0 || gr_prod_add(g, out, &zero, 1) || gr_prod_add(g, out, &rem[0], 1) || gr_prod_add(g, out, neg, 2))
        out = -1;
done:
    free(rem);
    return out;
}

int32_t js_string_value(js_rules *r, const char *s, size_t len) {
    json_t *j = json_stringn(s, len);
    if (!j) return -1;
    int32_t nt = js_value_literal(r, j);
    json_decref(j);
    return nt;
}

int32_t js_value_literal(js_rules *r, const json_t *v) {
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!text) return -1;
    int32_t nt = js_lit(r, text);
    free(text);
    return nt;
}

/* The names (decoded to code points) that share the first `depth` code points, as one node of
 * the exclusion trie, including the closing quote: E := '"' (unless a name ends here) | c E_c
 * (per next code point c of a name) | other-char js_char* '"' (any code point that continues no
 * name). No E is nullable, so nothing completes before the closing quote (which keeps the
 * characters of a key context-independent for the mask cache). */
typedef struct name_cp {
    const uint32_t *cp;
    uint32_t len;
} name_cp;

static int32_t shared_rules(js_rules *r) {
    gr_cfg *g = r->g;
    if (r->str_rest < 0) {
        int32_t syms[2] = {gr_star(g, js_char(r)), gr_term_byte(g, '"')};
        r->str_rest = gr_seq(g, syms, 2);
    }
    if (r->non_ascii < 0) {
        gr_charset cs = {0};
        r->non_ascii = gr_charset_add(&cs, 0x80, GR_MAX_CODEPOINT) ? -1 : gr_charset_utf8(g, &cs);
        gr_charset_free(&cs);
    }
    if (r->escapes < 0) {
        gr_charset cs = {0};
        int rc = gr_charset_add(&cs, 0, 0x1F) || gr_charset_add(&cs, '"', '"') || gr_charset_add(&cs, '\\', '\\');
        r->escapes = rc ? -1 : gr_charset_json(g, &cs);
        gr_charset_free(&cs);
    }
    return r->str_rest < 0 || r->non_ascii < 0 || r->escapes < 0 ? -1 : 0;
}

/* One character (canonical JSON form) other than the code points in `used`. When `used` holds
 * printable ASCII only (the usual property names), it is an ASCII class plus two shared rules. */
static int32_t other_char(js_rules *r, const gr_charset *used) {
    int ascii = 1;
    gr_class cl = {{0}};
    gr_class_set_range(&cl, 0x20, 0x7E);
    gr_class_clear(&cl, '"');
    gr_class_clear(&cl, '\\');
    for (uint32_t i = 0; i < used->n && ascii; i++) {
        if (used->r[i].lo < 0x20 || used->r[i].hi > 0x7E) ascii = 0;
        for (uint32_t c = used->r[i].lo; ascii && c <= used->r[i].hi; c++) {
            if (c == '"' || c == '\\') ascii = 0;
            gr_class_clear(&cl, (uint8_t)c);
        }
    }
    if (ascii) {
        if (shared_rules(r)) return -1;
        int32_t alts[3] = {gr_term(r->g, &cl), r->non_ascii, r->escapes};
        return gr_alt(r->g, alts, 3);
    }
    gr_charset other = {0};
    int32_t nt = gr_charset_add_set(&other, used) || gr_charset_negate(&other) ? -1 : gr_charset_json(r->g, &other);
    gr_charset_free(&other);
    return nt;
}

static int32_t except_node(js_rules *r, name_cp *names, uint32_t n, uint32_t depth) {
    gr_cfg *g = r->g;
    int32_t nt = gr_nt(g);
    if (nt < 0) return -1;
    int ends_here = 0;
    gr_charset used = {0};
    for (uint32_t i = 0; i < n; i++) {
        if (names[i].len == depth) {
            ends_here = 1;
            continue;
        }
        uint32_t c = names[i].cp[depth];
        if (gr_charset_has(&used, c)) continue;
        if (gr_charset_add(&used, c, c)) goto fail;
        /* the names continuing with c (moved to the front of a scratch copy) */
        name_cp *sub = malloc(n * sizeof *sub);
        if (!sub) goto fail;
        uint32_t k = 0;
        for (uint32_t j = 0; j < n; j++)
            if (names[j].len > depth && names[j].cp[depth] == c) sub[k++] = names[j];
        gr_charset one = {0};
        int32_t edge = gr_charset_add(&one, c, c) ? -1 : gr_charset_json(g, &one);
        gr_charset_free(&one);
        int32_t child = edge < 0 ? -1 : except_node(r, sub, k, depth + 1);
        free(sub);
        int32_t syms[2] = {edge, child};
        if (child < 0 || gr_prod_add(g, nt, syms, 2)) goto fail;
    }
    int32_t q = gr_term_byte(g, '"');
    if (!ends_here && gr_prod_add(g, nt, &q, 1)) goto fail;
    gr_charset_normalize(&used);
    int32_t other = other_char(r, &used);
    if (other < 0 || shared_rules(r)) goto fail;
    int32_t syms[2] = {other, r->str_rest};
    if (gr_prod_add(g, nt, syms, 2)) goto fail;
    gr_charset_free(&used);
    return nt;
fail:
    gr_charset_free(&used);
    return -1;
}

int32_t js_string_except(js_rules *r, const char *const *names, uint32_t n) {
    if (n == 0) return js_string(r);
    name_cp *nc = calloc(n, sizeof *nc);
    uint32_t *cps = NULL;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += strlen(names[i]);
    cps = malloc((total + 1) * sizeof *cps);
    int32_t out = -1;
    if (!nc || !cps) goto done;
    size_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *p = (const uint8_t *)names[i], *end = p + strlen(names[i]);
        nc[i].cp = cps + at;
        while (p < end) {
            int32_t c = gr_utf8_decode(&p, end);
            if (c < 0) goto done;
            cps[at++] = (uint32_t)c;
            nc[i].len++;
        }
    }
    int32_t body = except_node(r, nc, n, 0), q = gr_term_byte(r->g, '"');
    int32_t syms[2] = {q, body};
    out = body < 0 ? -1 : gr_seq(r->g, syms, 2);
done:
    free(nc);
    free(cps);
    return out;
}

int32_t js_any(js_rules *r) {
    if (r->any >= 0) return r->any;
    gr_cfg *g = r->g;
    int32_t value = gr_nt(g);
    if (value < 0) return -1;
    r->any = value; /* set first: the rules below refer to it */
    int32_t ws = js_ws(r), str = js_string(r), num = js_number(r);
    int32_t comma[3] = {ws, gr_term_byte(g, ','), ws};
    int32_t sep = gr_seq(g, comma, 3);
    int32_t colon[3] = {ws, gr_term_byte(g, ':'), ws};
    int32_t member_syms[3] = {str, gr_seq(g, colon, 3), value};
    int32_t member = gr_seq(g, member_syms, 3);
    int32_t more_m[2] = {sep, member};
    int32_t members_syms[2] = {member, gr_star(g, gr_seq(g, more_m, 2))};
    int32_t members = gr_opt(g, gr_seq(g, members_syms, 2));
    int32_t obj[5] = {gr_term_byte(g, '{'), ws, members, ws, gr_term_byte(g, '}')};
    int32_t more_v[2] = {sep, value};
    int32_t values_syms[2] = {value, gr_star(g, gr_seq(g, more_v, 2))};
    int32_t values = gr_opt(g, gr_seq(g, values_syms, 2));
    int32_t arr[5] = {gr_term_byte(g, '['), ws, values, ws, gr_term_byte(g, ']')};
    int32_t alts[7] = {gr_seq(g, obj, 5),  gr_seq(g, arr, 5), str, num, js_lit(r, "true"),
                       js_lit(r, "false"), js_lit(r, "null")};
    for (int i = 0; i < 7; i++)
        if (gr_prod_add(g, value, &alts[i], 1)) return r->any = -1;
    return value;
}
