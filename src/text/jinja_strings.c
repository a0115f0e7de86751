/* jinja_strings.c - Python str semantics on UTF-8 byte strings: whitespace
 * (str.isspace, incl. the Unicode spaces), strip/split/replace/startswith,
 * case mapping (ASCII and the 2-byte Latin/Greek/Cyrillic letters), title,
 * capitalize, and the str methods templates call (s.strip(), s.split(), ...).
 *
 * Results are new arena strings or slices of the input (strings are
 * immutable, so sharing is safe). */
#include <string.h>

#include "text/jinja.h"
#include "text/jinja_strings.h"

/* byte length of the whitespace character at s[i], 0 if none */
size_t jstr_ws_at(const char *s, size_t n, size_t i) {
    unsigned char c = (unsigned char)s[i];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c == 0xC2 && i + 1 < n && ((unsigned char)s[i + 1] == 0x85 || (unsigned char)s[i + 1] == 0xA0)) return 2;
    if (c == 0xE1 && i + 2 < n && (unsigned char)s[i + 1] == 0x9A && (unsigned char)s[i + 2] == 0x80) return 3;
    if (c == 0xE2 && i + 2 < n) {
        unsigned char d = (unsigned char)s[i + 1], e = (unsigned char)s[i + 2];
        if (d == 0x80 && (e <= 0x8A || e == 0xA8 || e == 0xA9 || e == 0xAF)) return 3;
        if (d == 0x81 && e == 0x9F) return 3;
    }
    if (c == 0xE3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 && (unsigned char)s[i + 2] == 0x80) return 3;
    return 0;
}

/* length of the whitespace character ending at s[i-1], 0 if none */
static size_t ws_before(const char *s, size_t n, size_t i) {
    for (size_t k = 1; k <= 3 && k <= i; k++)
        if (jstr_ws_at(s, n, i - k) == k) return k;
    return 0;
}

static size_t u8len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

/* is the character at s[i] (len k) in the chars set? */
static bool in_set(const char *s, size_t i, size_t k, jstr *set) {
    for (size_t j = 0; j < set->n;) {
        size_t l = u8len((unsigned char)set->p[j]);
        if (l == k && j + l <= set->n && memcmp(set->p + j, s + i, k) == 0) return true;
        j += l;
    }
    return false;
}

jv jstr_strip(jjob *j, jv v, jstr *chars, bool left, bool right) {
    const char *s = v.u.s->p;
    size_t n = v.u.s->n, a = 0, b = n;
    if (left)
        while (a < b) {
            size_t k = chars ? u8len((unsigned char)s[a]) : jstr_ws_at(s, n, a);
            if (chars && (a + k > b || !in_set(s, a, k, chars))) k = 0;
            if (!k) break;
            a += k;
        }
    if (right)
        while (b > a) {
            size_t k = 0;
            if (chars) {
                size_t q = b - 1;
                while (q > a && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
                if (in_set(s, q, b - q, chars)) k = b - q;
            } else k = ws_before(s, n, b);
            if (!k || b - k < a) break;
            b -= k;
        }
    return jv_str(j, s + a, b - a);
}

static char up(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 32) : c; }
static char lo(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }

/* Simple case mapping of the 2-byte UTF-8 letters whose cases pair up with
 * the same encoded length: Latin-1, Latin Extended-A, Greek, Cyrillic. */
static unsigned map_cp(unsigned cp, bool to_upper) {
    if (to_upper) {
        if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)) return cp - 0x20;
        if (cp >= 0x100 && cp <= 0x17F && cp != 0x131 && cp != 0x138 && cp != 0x149 && cp != 0x17F) {
            bool odd_lower = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
            if (odd_lower ? (cp % 2 == 0) : (cp % 2 == 1)) return cp - 1;
            return cp;
        }
        if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 0x20;
        if (cp >= 0x430 && cp <= 0x44F) return cp - 0x20;
        if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
    } else {
        if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 0x20;
        if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x138 && cp != 0x149 && cp != 0x17F) {
            bool odd_lower = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
            if (odd_lower ? (cp % 2 == 1) : (cp % 2 == 0)) return cp + 1;
            return cp;
        }
        if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 0x20;
        if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
        if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
    }
    return cp;
}

/* changes the case of the character at o[i] in place; returns its byte length */
static size_t case_at(char *o, size_t n, size_t i, bool to_upper, bool *is_alpha) {
    unsigned char c = (unsigned char)o[i];
    if (c < 0x80) {
        *is_alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        o[i] = to_upper ? up((char)c) : lo((char)c);
        return 1;
    }
    size_t k = u8len(c);
    *is_alpha = false;
    if (k == 2 && i + 1 < n) {
        unsigned cp = ((c & 0x1Fu) << 6) | ((unsigned char)o[i + 1] & 0x3Fu);
        unsigned m = map_cp(cp, to_upper);
        *is_alpha = map_cp(cp, !to_upper) != cp || m != cp;
        if (m != cp && m >= 0x80 && m < 0x800) {
            o[i] = (char)(0xC0 | (m >> 6));
            o[i + 1] = (char)(0x80 | (m & 0x3F));
        }
    }
    return i + k <= n ? k : n - i;
}

jv jstr_case(jjob *j, jv v, int mode) {
    size_t n = v.u.s->n;
    char *o = jalloc(j, n + 1);
    memcpy(o, v.u.s->p, n);
    bool alpha;
    if (mode == JCASE_UPPER || mode == JCASE_LOWER) {
        for (size_t i = 0; i < n;) i += case_at(o, n, i, mode == JCASE_UPPER, &alpha);
    } else if (mode == JCASE_CAPITALIZE) {
        for (size_t i = 0; i < n;) i += case_at(o, n, i, i == 0, &alpha);
    } else if (mode == JCASE_PYTITLE) { /* str.title(): upper after an uncased char */
        bool prev = false;
        for (size_t i = 0; i < n;) {
            char save[4];
            size_t k = u8len((unsigned char)o[i]);
            if (i + k > n) k = n - i;
            memcpy(save, o + i, k);
            case_at(o, n, i, !prev, &alpha);
            if (!alpha) memcpy(o + i, save, k);
            prev = alpha;
            i += k;
        }
    } else { /* Jinja's title filter: words split on [-\s({[<]+ */
        bool start = true;
        for (size_t i = 0; i < n;) {
            size_t w = jstr_ws_at(o, n, i);
            char ch = o[i];
            if (w || ch == '-' || ch == '(' || ch == '{' || ch == '[' || ch == '<') {
                start = true;
                i += w ? w : 1;
                continue;
            }
            i += case_at(o, n, i, start, &alpha);
            start = false;
        }
    }
    return jv_str(j, o, n);
}

jv jstr_replace(jctx *c, int line, jv v, jv old, jv new_, int64_t count) {
    jjob *j = c->job;
    jstr *s = v.u.s, *o = old.u.s, *nw = new_.u.s;
    jbuf b = {.limit = JINJA_MAX_OUTPUT};
    int64_t done = 0;
    if (o->n == 0) {
        size_t i = 0;
        while (i <= s->n) {
            if (count < 0 || done < count) {
                jbuf_put(j, &b, nw->p, nw->n);
                done++;
            }
            if (i == s->n) break;
            size_t k = u8len((unsigned char)s->p[i]);
            if (i + k > s->n) k = s->n - i;
            jbuf_put(j, &b, s->p + i, k);
            i += k;
        }
    } else {
        size_t i = 0;
        while (i < s->n) {
            const char *hit = (count < 0 || done < count) ? memmem(s->p + i, s->n - i, o->p, o->n) : NULL;
            if (!hit) {
                jbuf_put(j, &b, s->p + i, s->n - i);
                break;
            }
            size_t at = (size_t)(hit - s->p);
            jbuf_put(j, &b, s->p + i, at - i);
            jbuf_put(j, &b, nw->p, nw->n);
            i = at + o->n;
            done++;
        }
    }
    jctx_charge(c, line, b.n / 64 + (uint64_t)done);
    return b.p ? jbuf_take(j, &b) : jv_str(j, "", 0);
}

jv jstr_split(jctx *c, int line, jv v, jv sep, int64_t maxsplit) {
    jjob *j = c->job;
    const char *s = v.u.s->p;
    size_t n = v.u.s->n;
    jv r = jv_newlist(j, 0);
    if (sep.t == JV_NONE || sep.t == JV_UNDEF) {
        size_t i = 0;
        int64_t splits = 0;
        for (;;) {
            size_t w;
            while (i < n && (w = jstr_ws_at(s, n, i))) i += w;
            if (i >= n) break;
            if (maxsplit >= 0 && splits >= maxsplit) { /* the rest, trailing whitespace kept */
                jlist_push(j, r.u.l, jv_str(j, s + i, n - i));
                break;
            }
            size_t st = i;
            while (i < n && !jstr_ws_at(s, n, i)) i++;
            jlist_push(j, r.u.l, jv_str(j, s + st, i - st));
            splits++;
            jctx_charge(c, line, 1);
        }
        return r;
    }
    if (sep.t != JV_STR) jfail(j, line, "must be str or None, not %s", jv_typename(sep));
    if (sep.u.s->n == 0) jfail(j, line, "empty separator");
    size_t i = 0;
    int64_t splits = 0;
    for (;;) {
        const char *hit = (maxsplit < 0 || splits < maxsplit) ? memmem(s + i, n - i, sep.u.s->p, sep.u.s->n) : NULL;
        if (!hit) {
            jlist_push(j, r.u.l, jv_str(j, s + i, n - i));
            break;
        }
        size_t at = (size_t)(hit - s);
        jlist_push(j, r.u.l, jv_str(j, s + i, at - i));
        i = at + sep.u.s->n;
        splits++;
        jctx_charge(c, line, 1);
    }
    return r;
}

static bool affix(jv s, jv a, bool start) {
    if (a.t != JV_STR || a.u.s->n > s.u.s->n) return false;
    const char *p = start ? s.u.s->p : s.u.s->p + s.u.s->n - a.u.s->n;
    return memcmp(p, a.u.s->p, a.u.s->n) == 0;
}

bool jstr_affix(jctx *c, int line, jv s, jv a, bool start) {
    if (a.t == JV_LIST && a.tuple) {
        for (size_t i = 0; i < a.u.l->n; i++)
            if (affix(s, a.u.l->v[i], start)) return true;
        return false;
    }
    if (a.t != JV_STR)
        jfail(c->job, line, "%s first arg must be str or a tuple of str, not %s", start ? "startswith" : "endswith",
              jv_typename(a));
    return affix(s, a, start);
}

/* "{} {0} {name}".format(...) - plain replacement fields only */
jv jstr_format(jctx *c, int line, jv fmt, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    jjob *j = c->job;
    jbuf b = {.limit = JINJA_MAX_OUTPUT};
    const char *s = fmt.u.s->p;
    size_t n = fmt.u.s->n;
    int auto_idx = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '{' && i + 1 < n && s[i + 1] == '{') {
            jbuf_putc(j, &b, '{');
            i++;
            continue;
        }
        if (s[i] == '}' && i + 1 < n && s[i + 1] == '}') {
            jbuf_putc(j, &b, '}');
            i++;
            continue;
        }
        if (s[i] != '{') {
            jbuf_putc(j, &b, s[i]);
            continue;
        }
        size_t e = i + 1;
        while (e < n && s[e] != '}') e++;
        if (e >= n) jfail(j, line, "format: single '{' encountered in format string");
        const char *f = s + i + 1;
        size_t fl = e - i - 1;
        if (memchr(f, ':', fl) || memchr(f, '!', fl) || memchr(f, '.', fl) || memchr(f, '[', fl))
            jfail(j, line, "format: conversion/format specs are not supported");
        jv v;
        if (fl == 0) {
            if (auto_idx >= nargs) jfail(j, line, "format: replacement index %d out of range", auto_idx);
            v = args[auto_idx++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            int idx = 0;
            for (size_t k = 0; k < fl && k < 6; k++) idx = idx * 10 + (f[k] - '0');
            if (idx >= nargs) jfail(j, line, "format: replacement index %d out of range", idx);
            v = args[idx];
        } else {
            int k;
            for (k = 0; k < nkw; k++)
                if (strlen(kwn[k]) == fl && !memcmp(kwn[k], f, fl)) break;
            if (k == nkw) jfail(j, line, "format: missing key '%.*s'", (int)fl, f);
            v = kwv[k];
        }
        jv_str_into(j, &b, v);
        i = e;
    }
    return b.p ? jbuf_take(j, &b) : jv_str(j, "", 0);
}
