/* regex.c - ECMAScript-style regular expressions (the subset JSON Schema `pattern` uses) compiled
 * straight to CFG rules over UTF-8 bytes (a regular grammar: repetition becomes left recursion,
 * which the Earley matcher runs in constant items per byte, like an NFA).
 * Supported: literals (UTF-8), '.', classes [...] with ranges and negation, escapes \d \w \s \D
 * \W \S \n \r \t \f \v \0 \xHH \uHHHH \u{H..} and escaped punctuation, groups ( ) (?: ) (?<name> ),
 * alternation, quantifiers * + ? {m} {m,} {m,n} (lazy forms match the same language), and the
 * anchors ^ / $ at the start / end of a top-level alternative.
 * Not supported (an error naming it, never ignored): backreferences, lookaround, \b \B, anchors
 * elsewhere, flags. Bounded repetition expands into rules, so a huge count fails on the grammar
 * size limit; nesting is bounded by the depth limit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/charset.h"
#include "grammar/grammar_impl.h"

typedef struct rx {
    gr_cfg *g;
    const uint8_t *s, *p, *end;
    int mode;
    uint32_t depth;
    cinfer_grammar_error *err;
    int failed;
} rx;

static int32_t rx_fail(rx *r, const char *what) {
    if (!r->failed) {
        r->failed = 1;
        if (r->g->failed) gr_limit_fail(r->g, r->err);
        else gr_fail(r->err, "pattern", (long)(r->p - r->s), "regex: %s at offset %ld", what, (long)(r->p - r->s));
    }
    return -1;
}

static int32_t set_to_nt(rx *r, gr_charset *cs) {
    gr_charset_normalize(cs);
    int32_t nt = r->mode == GR_RX_JSON_STRING ? gr_charset_json(r->g, cs) : gr_charset_utf8(r->g, cs);
    gr_charset_free(cs);
    return nt < 0 ? rx_fail(r, "grammar limit") : nt;
}

static int add_perl_class(gr_charset *cs, char k) {
    gr_charset t = {0};
    int rc = 0;
    char lower = (char)(k | 0x20);
    if (lower == 'd') rc = gr_charset_add(&t, '0', '9');
    else if (lower == 'w')
        rc = gr_charset_add(&t, '0', '9') || gr_charset_add(&t, 'A', 'Z') || gr_charset_add(&t, 'a', 'z') ||
             gr_charset_add(&t, '_', '_');
    else /* s: ECMAScript WhiteSpace and LineTerminator */
        rc = gr_charset_add(&t, 9, 13) || gr_charset_add(&t, ' ', ' ') || gr_charset_add(&t, 0xA0, 0xA0) ||
             gr_charset_add(&t, 0x1680, 0x1680) || gr_charset_add(&t, 0x2000, 0x200A) ||
             gr_charset_add(&t, 0x2028, 0x2029) || gr_charset_add(&t, 0x202F, 0x202F) ||
             gr_charset_add(&t, 0x205F, 0x205F) || gr_charset_add(&t, 0x3000, 0x3000) ||
             gr_charset_add(&t, 0xFEFF, 0xFEFF);
    if (!rc && k != lower) rc = gr_charset_negate(&t);
    if (!rc) rc = gr_charset_add_set(cs, &t);
    gr_charset_free(&t);
    return rc;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
    return -1;
}

static int64_t read_hex(rx *r, int n) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (r->p >= r->end || hexval(*r->p) < 0) return -1;
        v = v * 16 + hexval(*r->p++);
    }
    return v;
}

/* After a backslash: a single code point escape, or -2 for a class escape (\d etc., added to cs),
 * or -1 on error. in_class: \b means backspace. */
static int64_t read_escape(rx *r, gr_charset *cs, int in_class) {
    if (r->p >= r->end) return rx_fail(r, "trailing backslash");
    uint8_t c = *r->p++;
    switch (c) {
    case 'd':
    case 'D':
    case 'w':
    case 'W':
    case 's':
    case 'S': return add_perl_class(cs, (char)c) ? rx_fail(r, "out of memory") : -2;
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': /* NUL; followed by a digit it would be a legacy octal escape, which ECMAScript (unicode) refuses */
        if (r->p < r->end && *r->p >= '0' && *r->p <= '9') return rx_fail(r, "unsupported octal escape");
        return 0;
    case 'b':
        if (in_class) return '\b';
        return rx_fail(r, "unsupported word boundary \\b");
    case 'B': return rx_fail(r, "unsupported \\B");
    case 'x': {
        int64_t v = read_hex(r, 2);
        return v < 0 ? rx_fail(r, "bad \\x escape") : v;
    }
    case 'u': {
        if (r->p < r->end && *r->p == '{') {
            r->p++;
            int64_t v = 0;
            int n = 0;
            while (r->p < r->end && hexval(*r->p) >= 0 && n < 7) v = v * 16 + hexval(*r->p++), n++;
            if (r->p >= r->end || *r->p != '}' || n == 0 || v > GR_MAX_CODEPOINT) return rx_fail(r, "bad \\u{} escape");
            r->p++;
            return v;
        }
        int64_t v = read_hex(r, 4);
        if (v < 0) return rx_fail(r, "bad \\u escape");
        if (v >= 0xD800 && v <= 0xDBFF && r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u') {
            const uint8_t *save = r->p;
            r->p += 2;
            int64_t lo = read_hex(r, 4);
            if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            r->p = save;
        }
        return v;
    }
    case 'c': return rx_fail(r, "unsupported \\c escape");
    case 'k': return rx_fail(r, "unsupported named backreference");
    case 'p':
    case 'P': return rx_fail(r, "unsupported unicode property escape");
    default:
        if (c >= '1' && c <= '9') return rx_fail(r, "unsupported backreference");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return rx_fail(r, "unknown escape");
        if (c >= 0x80) {
            r->p--;
            int32_t cp = gr_utf8_decode(&r->p, r->end);
            return cp < 0 ? rx_fail(r, "invalid UTF-8") : cp;
        }
        return c;
    }
}

static int64_t read_literal(rx *r) {
    int32_t cp = gr_utf8_decode(&r->p, r->end);
    return cp < 0 ? rx_fail(r, "invalid UTF-8") : cp;
}

/* One class member (code point or class escape) into cs; returns the code point, -2 for a class
 * escape, -1 on error. */
static int64_t class_atom(rx *r, gr_charset *cs) {
    if (*r->p == '\\') {
        r->p++;
        return read_escape(r, cs, 1);
    }
    return read_literal(r);
}

static int32_t parse_class(rx *r) {
    r->p++; /* '[' */
    int negate = r->p < r->end && *r->p == '^';
    if (negate) r->p++;
    gr_charset cs = {0};
    while (r->p < r->end && *r->p != ']') {
        int64_t lo = class_atom(r, &cs);
        if (lo == -1) break;
        if (lo == -2) continue;
        int64_t hi = lo;
        if (r->end - r->p >= 2 && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            hi = class_atom(r, &cs);
            if (hi == -1) break;
            if (hi == -2 || hi < lo) {
                rx_fail(r, "bad class range");
                break;
            }
        }
        if (gr_charset_add(&cs, (uint32_t)lo, (uint32_t)hi)) {
            rx_fail(r, "out of memory");
            break;
        }
    }
    if (!r->failed && r->p >= r->end) rx_fail(r, "unterminated character class");
    if (r->failed || (negate && gr_charset_negate(&cs))) {
        gr_charset_free(&cs);
        return rx_fail(r, "out of memory");
    }
    r->p++; /* ']' */
    return set_to_nt(r, &cs);
}

static int32_t parse_alt(rx *r, int top);

static int32_t parse_group(rx *r) {
    r->p++; /* '(' */
    if (r->p < r->end && *r->p == '?') {
        if (r->end - r->p >= 2 && r->p[1] == ':') r->p += 2;
        else if (r->end - r->p >= 3 && r->p[1] == '<' && r->p[2] != '=' && r->p[2] != '!') {
            const uint8_t *q = memchr(r->p, '>', (size_t)(r->end - r->p));
            if (!q) return rx_fail(r, "bad group name");
            r->p = q + 1;
        } else return rx_fail(r, "unsupported lookaround or group flag");
    }
    if (r->depth == 0) return rx_fail(r, "nesting too deep");
    r->depth--;
    int32_t nt = parse_alt(r, 0);
    r->depth++;
    if (nt < 0) return -1;
    if (r->p >= r->end || *r->p != ')') return rx_fail(r, "missing )");
    r->p++;
    return nt;
}

static int32_t parse_atom(rx *r) {
    uint8_t c = *r->p;
    if (c == '(') return parse_group(r);
    if (c == '[') return parse_class(r);
    gr_charset cs = {0};
    int64_t cp;
    if (c == '.') {
        r->p++;
        cp = -2;
        if (gr_charset_add(&cs, '\n', '\n') || gr_charset_add(&cs, '\r', '\r') || gr_charset_add(&cs, 0x2028, 0x2029) ||
            gr_charset_negate(&cs))
            cp = rx_fail(r, "out of memory");
    } else if (c == '\\') {
        r->p++;
        cp = read_escape(r, &cs, 0);
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return rx_fail(r, "nothing to repeat");
    } else if (c == ')') {
        return rx_fail(r, "unmatched )");
    } else {
        cp = read_literal(r);
    }
    if (cp == -1) {
        gr_charset_free(&cs);
        return -1;
    }
    if (cp >= 0 && gr_charset_add(&cs, (uint32_t)cp, (uint32_t)cp)) cp = rx_fail(r, "out of memory");
    return set_to_nt(r, &cs);
}

/* Reads {m}, {m,}, {m,n}; returns 1 if a quantifier was read, 0 if '{' is a literal, -1 on error. */
static int read_braces(rx *r, uint32_t *min, int64_t *max) {
    const uint8_t *q = r->p + 1;
    int64_t a = 0, b;
    int digits = 0;
    while (q < r->end && *q >= '0' && *q <= '9' && a <= 1000000) a = a * 10 + (*q++ - '0'), digits++;
    if (!digits || q >= r->end) return 0;
    if (*q == '}') b = a;
    else if (*q == ',') {
        q++;
        if (q < r->end && *q == '}') b = -1;
        else {
            b = 0;
            digits = 0;
            while (q < r->end && *q >= '0' && *q <= '9' && b <= 1000000) b = b * 10 + (*q++ - '0'), digits++;
            if (!digits || q >= r->end || *q != '}') return 0;
        }
    } else return 0;
    if (a > 1000000 || b > 1000000) return rx_fail(r, "repetition count too large");
    if (b >= 0 && b < a) return rx_fail(r, "repetition {m,n} with n < m");
    r->p = q + 1;
    *min = (uint32_t)a;
    *max = b;
    return 1;
}

static int32_t parse_repeat(rx *r) {
    int32_t atom = parse_atom(r);
    if (atom < 0 || r->p >= r->end) return atom;
    uint8_t c = *r->p;
    uint32_t min;
    int64_t max;
    if (c == '*') min = 0, max = -1, r->p++;
    else if (c == '+') min = 1, max = -1, r->p++;
    else if (c == '?') min = 0, max = 1, r->p++;
    else if (c == '{') {
        int k = read_braces(r, &min, &max);
        if (k < 0) return -1;
        if (k == 0) return atom;
    } else return atom;
    if (r->p < r->end && *r->p == '?') r->p++; /* lazy: same language */
    if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?'))
        return rx_fail(r, "nothing to repeat"); /* ECMAScript has no stacked or possessive quantifiers */
    if (r->p < r->end && *r->p == '{') {
        uint32_t m2;
        int64_t x2;
        const uint8_t *save = r->p;
        int k = read_braces(r, &m2, &x2);
        r->p = save;
        if (k != 0) return rx_fail(r, "nothing to repeat");
    }
    atom = gr_repeat(r->g, atom, min, max);
    return atom < 0 ? rx_fail(r, "grammar limit") : atom;
}

/* An alternative: a sequence up to '|' or ')' or the end. top: ^ and $ allowed at its ends. */
static int32_t parse_concat(rx *r, int top) {
    int32_t nt = gr_nt(r->g);
    if (nt < 0) return rx_fail(r, "grammar limit");
    int anchored_start = 0, anchored_end = 0;
    if (r->p < r->end && *r->p == '^') {
        if (!top) return rx_fail(r, "unsupported anchor ^ inside a group");
        anchored_start = 1;
        r->p++;
    }
    int32_t syms[3];
    int32_t seq = gr_nt(r->g);
    if (seq < 0 || gr_prod_add(r->g, seq, NULL, 0)) return rx_fail(r, "grammar limit");
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (*r->p == '$') {
            if (!top || !(r->p + 1 == r->end || r->p[1] == '|')) return rx_fail(r, "unsupported anchor $ here");
            anchored_end = 1;
            r->p++;
            break;
        }
        if (*r->p == '^') return rx_fail(r, "unsupported anchor ^ here");
        int32_t item = parse_repeat(r);
        if (item < 0) return -1;
        int32_t next = gr_nt(r->g);
        syms[0] = seq, syms[1] = item;
        if (next < 0 || gr_prod_add(r->g, next, syms, 2)) return rx_fail(r, "grammar limit");
        seq = next;
    }
    int n = 0;
    int32_t any = -1;
    if (top && r->mode == GR_RX_JSON_STRING && (!anchored_start || !anchored_end)) {
        gr_charset all = {0};
        if (gr_charset_add(&all, 0, GR_MAX_CODEPOINT)) return rx_fail(r, "out of memory");
        int32_t one = set_to_nt(r, &all);
        any = one < 0 ? -1 : gr_star(r->g, one);
        if (any < 0) return rx_fail(r, "grammar limit");
    }
    if (any >= 0 && !anchored_start) syms[n++] = any;
    syms[n++] = seq;
    if (any >= 0 && !anchored_end) syms[n++] = any;
    if (gr_prod_add(r->g, nt, syms, (uint32_t)n)) return rx_fail(r, "grammar limit");
    return nt;
}

static int32_t parse_alt(rx *r, int top) {
    int32_t nt = gr_nt(r->g);
    if (nt < 0) return rx_fail(r, "grammar limit");
    for (;;) {
        int32_t a = parse_concat(r, top);
        if (a < 0 || gr_prod_add(r->g, nt, &a, 1)) return rx_fail(r, "grammar limit");
        if (r->p < r->end && *r->p == '|') {
            r->p++;
            continue;
        }
        return nt;
    }
}

int32_t gr_regex_compile(gr_cfg *g, const char *re, size_t len, int mode, uint32_t depth, cinfer_grammar_error *err) {
    rx r = {.g = g,
            .s = (const uint8_t *)re,
            .p = (const uint8_t *)re,
            .end = (const uint8_t *)re + len,
            .mode = mode,
            .depth = depth,
            .err = err};
    int32_t nt = parse_alt(&r, 1);
    if (nt < 0) return rx_fail(&r, "grammar limit");
    if (r.p != r.end) return rx_fail(&r, "unmatched )");
    return nt;
}
