/* gbnf.c - llama.cpp's GBNF grammar format parsed into CFG rules over UTF-8 bytes.
 * Syntax: rules `name ::= alternatives`; names are [A-Za-z0-9_-]+; a sequence holds string
 * literals "..." (escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH), character classes
 * [...] / [^...] with ranges, `.` (any character), rule references, groups ( ), and the postfix
 * operators * + ? {m} {m,} {m,n}; `#` starts a comment. A rule ends where the next `name ::=`
 * starts (so newlines are free-form, a superset of llama.cpp's layout rules). The start rule is
 * `root`. Errors (with the byte offset): syntax, undefined rule, missing root, duplicate-free
 * redefinition is allowed as extra alternatives (as llama.cpp does), token references <...>
 * (byte-level matching cannot see token ids). Names map to nonterminals via a linear table
 * (grammars have tens to hundreds of rules). */
#include <stdlib.h>
#include <string.h>

#include "grammar/charset.h"
#include "grammar/grammar_impl.h"

typedef struct gb_name {
    const char *s;
    size_t len;
    int32_t nt;
    int defined;
    long first_use;
} gb_name;

typedef struct gb {
    gr_cfg *g;
    const char *src, *p, *end;
    uint32_t depth;
    gb_name *names;
    uint32_t n_names, cap_names;
    cinfer_grammar_error *err;
    int failed;
} gb;

static int32_t gb_fail(gb *b, const char *what) {
    if (!b->failed) {
        b->failed = 1;
        if (b->g->failed) gr_limit_fail(b->g, b->err);
        else gr_fail(b->err, "", (long)(b->p - b->src), "grammar: %s at offset %ld", what, (long)(b->p - b->src));
    }
    return -1;
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_space(gb *b) {
    while (b->p < b->end) {
        char c = *b->p;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') b->p++;
        else if (c == '#')
            while (b->p < b->end && *b->p != '\n') b->p++;
        else break;
    }
}

static int32_t name_nt(gb *b, const char *s, size_t len) {
    for (uint32_t i = 0; i < b->n_names; i++)
        if (b->names[i].len == len && !memcmp(b->names[i].s, s, len)) return (int32_t)i;
    if (b->n_names == b->cap_names) {
        uint32_t n = b->cap_names ? b->cap_names * 2 : 32;
        gb_name *p = realloc(b->names, (size_t)n * sizeof *p);
        if (!p) return gb_fail(b, "out of memory");
        b->names = p;
        b->cap_names = n;
    }
    int32_t nt = gr_nt(b->g);
    if (nt < 0) return gb_fail(b, "grammar limit");
    b->names[b->n_names] = (gb_name){.s = s, .len = len, .nt = nt, .defined = 0, .first_use = (long)(s - b->src)};
    return (int32_t)b->n_names++;
}

/* 1 if the input at p is `name ::=` (the start of the next rule). */
static int at_rule_start(const gb *b) {
    const char *q = b->p;
    while (q < b->end && is_name_char(*q)) q++;
    if (q == b->p) return 0;
    while (q < b->end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    return b->end - q >= 3 && !memcmp(q, "::=", 3);
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
    return -1;
}

/* One character of a literal or class (handles escapes and UTF-8). -1 on error. */
static int64_t read_char(gb *b) {
    if (b->p >= b->end) return gb_fail(b, "unexpected end");
    if (*b->p != '\\') {
        const uint8_t *q = (const uint8_t *)b->p;
        int32_t c = gr_utf8_decode(&q, (const uint8_t *)b->end);
        if (c < 0) return gb_fail(b, "invalid UTF-8");
        b->p = (const char *)q;
        return c;
    }
    b->p++;
    if (b->p >= b->end) return gb_fail(b, "trailing backslash");
    char e = *b->p++;
    int n = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (n) {
        int64_t v = 0;
        for (int i = 0; i < n; i++) {
            if (b->p >= b->end || hexv(*b->p) < 0) return gb_fail(b, "bad hex escape");
            v = v * 16 + hexv(*b->p++);
        }
        if (v > GR_MAX_CODEPOINT) return gb_fail(b, "code point out of range");
        return v;
    }
    switch (e) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
    case '^': return e;
    default: return gb_fail(b, "unknown escape");
    }
}

static int32_t parse_literal(gb *b) {
    b->p++; /* '"' */
    int32_t nt = gr_nt(b->g);
    if (nt < 0) return gb_fail(b, "grammar limit");
    int32_t syms[256];
    uint32_t n = 0;
    int32_t acc = -1; /* for long literals: chain of chunks */
    while (b->p < b->end && *b->p != '"') {
        int64_t c = read_char(b);
        if (c < 0) return -1;
        uint8_t enc[4];
        int k = gr_utf8_encode((uint32_t)c, enc);
        for (int i = 0; i < k; i++) {
            if (n == 250) { /* flush a chunk */
                int32_t chunk = gr_seq(b->g, syms, n);
                if (chunk < 0) return gb_fail(b, "grammar limit");
                int32_t pair[2] = {acc, chunk};
                acc = acc < 0 ? chunk : gr_seq(b->g, pair, 2);
                if (acc < 0) return gb_fail(b, "grammar limit");
                n = 0;
            }
            if (!(syms[n++] = gr_term_byte(b->g, enc[i]))) return gb_fail(b, "grammar limit");
        }
    }
    if (b->p >= b->end) return gb_fail(b, "unterminated string literal");
    b->p++;
    int32_t rest = gr_seq(b->g, syms, n);
    if (rest < 0) return gb_fail(b, "grammar limit");
    int32_t pair[2] = {acc, rest};
    if (gr_prod_add(b->g, nt, acc < 0 ? &rest : pair, acc < 0 ? 1 : 2)) return gb_fail(b, "grammar limit");
    return nt;
}

static int32_t parse_class(gb *b) {
    b->p++; /* '[' */
    int negate = b->p < b->end && *b->p == '^';
    if (negate) b->p++;
    gr_charset cs = {0};
    int32_t nt = -1;
    while (b->p < b->end && *b->p != ']') {
        int64_t lo = read_char(b), hi;
        if (lo < 0) goto out;
        hi = lo;
        if (b->end - b->p >= 2 && b->p[0] == '-' && b->p[1] != ']') {
            b->p++;
            hi = read_char(b);
            if (hi < 0) goto out;
            if (hi < lo) {
                gb_fail(b, "bad class range");
                goto out;
            }
        }
        if (gr_charset_add(&cs, (uint32_t)lo, (uint32_t)hi)) {
            gb_fail(b, "out of memory");
            goto out;
        }
    }
    if (b->p >= b->end) {
        gb_fail(b, "unterminated character class");
        goto out;
    }
    b->p++;
    gr_charset_normalize(&cs);
    if (negate && gr_charset_negate(&cs)) {
        gb_fail(b, "out of memory");
        goto out;
    }
    nt = gr_charset_utf8(b->g, &cs);
    if (nt < 0) gb_fail(b, "grammar limit");
out:
    gr_charset_free(&cs);
    return nt;
}

static int32_t parse_alternatives(gb *b);

static int32_t parse_primary(gb *b) {
    char c = *b->p;
    if (c == '"') return parse_literal(b);
    if (c == '[') return parse_class(b);
    if (c == '.') {
        b->p++;
        gr_charset cs = {0};
        int32_t nt = gr_charset_add(&cs, 0, GR_MAX_CODEPOINT) ? -1 : gr_charset_utf8(b->g, &cs);
        gr_charset_free(&cs);
        return nt < 0 ? gb_fail(b, "grammar limit") : nt;
    }
    if (c == '(') {
        b->p++;
        if (b->depth == 0) return gb_fail(b, "nesting too deep");
        b->depth--;
        int32_t nt = parse_alternatives(b);
        b->depth++;
        skip_space(b);
        if (nt < 0) return -1;
        if (b->p >= b->end || *b->p != ')') return gb_fail(b, "expected )");
        b->p++;
        return nt;
    }
    if (c == '<' || c == '!') return gb_fail(b, "token references (<...>) are not supported");
    if (is_name_char(c)) {
        const char *s = b->p;
        while (b->p < b->end && is_name_char(*b->p)) b->p++;
        int32_t idx = name_nt(b, s, (size_t)(b->p - s));
        return idx < 0 ? -1 : b->names[idx].nt;
    }
    return gb_fail(b, "unexpected character");
}

/* Reads a decimal count (at most 100000) without reading past the end. Returns 0 or -1. */
static int read_count(gb *b, unsigned long *out) {
    unsigned long v = 0;
    const char *start = b->p;
    while (b->p < b->end && *b->p >= '0' && *b->p <= '9' && v <= 100000) v = v * 10 + (unsigned long)(*b->p++ - '0');
    if (b->p == start || v > 100000) return -1;
    *out = v;
    return 0;
}

/* One repetition operator at most: a stacked one (x++, x*?, x+{1,3}) nests repetitions, which makes
 * the grammar highly ambiguous and the Earley matcher slow (seconds per token); it is refused with
 * a hint to nest with parentheses (docs/grammar.md). */
static int32_t parse_postfix(gb *b, int32_t sym) {
    for (int ops = 0;; ops++) {
        if (b->p >= b->end) return sym;
        char c = *b->p;
        if (ops > 0 && (c == '*' || c == '+' || c == '?' || c == '{'))
            return gb_fail(b, "stacked repetition operators (write one; nest with parentheses if intended)");
        uint32_t min;
        int64_t max;
        if (c == '*') min = 0, max = -1, b->p++;
        else if (c == '+') min = 1, max = -1, b->p++;
        else if (c == '?') min = 0, max = 1, b->p++;
        else if (c == '{') {
            b->p++;
            unsigned long a, z;
            if (read_count(b, &a)) return gb_fail(b, "bad repetition");
            max = (int64_t)a;
            if (b->p < b->end && *b->p == ',') {
                b->p++;
                max = -1;
                if (b->p < b->end && *b->p >= '0' && *b->p <= '9') {
                    if (read_count(b, &z) || z < a) return gb_fail(b, "bad repetition");
                    max = (int64_t)z;
                }
            }
            if (b->p >= b->end || *b->p != '}') return gb_fail(b, "expected }");
            b->p++;
            min = (uint32_t)a;
        } else return sym;
        sym = gr_repeat(b->g, sym, min, max);
        if (sym < 0) return gb_fail(b, "grammar limit");
    }
}

/* A sequence; ends at '|', ')', the end, or the start of the next rule. */
static int32_t parse_sequence(gb *b) {
    int32_t seq = gr_nt(b->g);
    if (seq < 0 || gr_prod_add(b->g, seq, NULL, 0)) return gb_fail(b, "grammar limit");
    for (;;) {
        skip_space(b);
        if (b->p >= b->end || *b->p == '|' || *b->p == ')' || at_rule_start(b)) return seq;
        int32_t item = parse_primary(b);
        if (item < 0) return -1;
        item = parse_postfix(b, item);
        if (item < 0) return -1;
        int32_t pair[2] = {seq, item};
        seq = gr_seq(b->g, pair, 2);
        if (seq < 0) return gb_fail(b, "grammar limit");
    }
}

static int32_t parse_alternatives(gb *b) {
    int32_t nt = gr_nt(b->g);
    if (nt < 0) return gb_fail(b, "grammar limit");
    for (;;) {
        int32_t s = parse_sequence(b);
        if (s < 0 || gr_prod_add(b->g, nt, &s, 1)) return gb_fail(b, "grammar limit");
        skip_space(b);
        if (b->p < b->end && *b->p == '|') {
            b->p++;
            continue;
        }
        return nt;
    }
}

static int parse_rules(gb *b) {
    for (;;) {
        skip_space(b);
        if (b->p >= b->end) return 0;
        if (!at_rule_start(b)) return gb_fail(b, "expected a rule `name ::= ...`");
        const char *s = b->p;
        while (is_name_char(*b->p)) b->p++;
        int32_t idx = name_nt(b, s, (size_t)(b->p - s));
        if (idx < 0) return -1;
        skip_space(b);
        b->p += 3; /* ::= */
        int32_t body = parse_alternatives(b);
        if (body < 0) return -1;
        if (b->p < b->end && *b->p == ')') return gb_fail(b, "unmatched )");
        b->names[idx].defined = 1;
        if (gr_prod_add(b->g, b->names[idx].nt, &body, 1)) return gb_fail(b, "grammar limit");
    }
}

int32_t gr_gbnf_compile(gr_cfg *g, const char *text, size_t len, uint32_t depth, cinfer_grammar_error *err) {
    gb b = {.g = g, .src = text, .p = text, .end = text + len, .depth = depth, .err = err};
    int32_t root = -1;
    if (!parse_rules(&b)) {
        for (uint32_t i = 0; i < b.n_names && !b.failed; i++)
            if (!b.names[i].defined) {
                b.p = b.src + b.names[i].first_use;
                gr_fail(err, "", b.names[i].first_use, "grammar: undefined rule '%.*s' at offset %ld",
                        (int)b.names[i].len, b.names[i].s, b.names[i].first_use);
                b.failed = 1;
            }
        for (uint32_t i = 0; i < b.n_names && !b.failed && root < 0; i++)
            if (b.names[i].len == 4 && !memcmp(b.names[i].s, "root", 4)) root = b.names[i].nt;
        if (!b.failed && root < 0) gr_fail(err, "", -1, "grammar: no `root` rule");
    }
    free(b.names);
    return root;
}
