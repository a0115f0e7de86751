/* json_pattern_len.c - patterns that are one character class C repeated (^C+$, ^C*$, C+, C*),
 * the common shape in real schemas (^[a-zA-Z0-9_.]+$ with maxLength 12, [0-9a-f]+ with length 12,
 * patternProperties ^\d+$). With minLength/maxLength, the intersection of such a pattern with the length limits is rewritten into one
 * bounded regex that the regex front end compiles like any other pattern:
 *   - anchored ^C+$ / ^C*$: ^C{lo,hi}$ (lo raised to 1 for +);
 *   - unanchored C* (matches every string): the length limits alone;
 *   - unanchored C+ (search semantics: some character is in C): one alternative per position i of
 *     the first character in C, ^(?:N{i}C[\s\S]{..}|...)$ with N the complement of C, so the
 *     alternatives are disjoint and the grammar stays unambiguous.
 * The same shapes give patternProperties their complement (the names a pattern does not match,
 * which additionalProperties then types) and tell which of them match every name.
 * Length is counted in code points, one per regex character, as JSON Schema counts it. Any other
 * pattern shape is not handled here (the caller reports the keyword). Large limits make large
 * grammars, which fail cleanly on the compile size limit. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema.h"

/* The length of the class atom at p ([...], \d \w \s and their negations, or .), or 0. */
static size_t class_atom_len(const char *p) {
    if (p[0] == '.') return 1;
    if (p[0] == '\\') return p[1] && strchr("dDwWsS", p[1]) ? 2 : 0;
    if (p[0] != '[') return 0;
    for (size_t i = 1; p[i]; i++) {
        if (p[i] == '\\') {
            if (!p[i + 1]) return 0;
            i++;
        } else if (p[i] == '[') {
            return 0; /* a nested [ (class set syntax) is not this simple shape */
        } else if (p[i] == ']') {
            return i + 1;
        }
    }
    return 0;
}

/* Writes the complement of the class atom a (length n) into out (room for n + 32). */
static void complement(const char *a, size_t n, char *out) {
    if (a[0] == '.') strcpy(out, "[\\n\\r\\u2028\\u2029]");
    else if (a[0] == '\\') snprintf(out, 3, "\\%c", a[1] ^ 0x20); /* \d <-> \D, \w <-> \W, \s <-> \S */
    else if (a[1] == '^') snprintf(out, n + 32, "[%.*s", (int)(n - 2), a + 2);
    else snprintf(out, n + 32, "[^%.*s", (int)(n - 1), a + 1);
}

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap <= b->n + (size_t)k) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* ^(?:N{i}C[\s\S]{lo,hi}|...)$ over the positions i of the first character in C. */
static void unanchored_plus(sbuf *b, const char *c, size_t n, const char *neg, int64_t min, int64_t max) {
    put(b, "^(?:");
    int64_t last = max >= 0 ? max - 1 : (min > 1 ? min - 1 : 0); /* with no max, the last i is "or more" */
    for (int64_t i = 0; i <= last; i++) {
        int64_t rest_lo = min - i - 1 > 0 ? min - i - 1 : 0;
        put(b, "%s", i ? "|" : "");
        if (i == last && max < 0) put(b, "%s{%lld,}", neg, (long long)i);
        else if (i) put(b, "%s{%lld}", neg, (long long)i);
        put(b, "%.*s", (int)n, c);
        if (max >= 0) put(b, "[\\s\\S]{%lld,%lld}", (long long)rest_lo, (long long)(max - i - 1));
        else if (i == last) put(b, "[\\s\\S]*");
        else put(b, "[\\s\\S]{%lld,}", (long long)rest_lo);
    }
    put(b, ")$");
}

int js_class_run_with_length(const char *pat, int64_t min, int64_t max, char **out, int *any) {
    *out = NULL;
    *any = 0;
    int start = pat[0] == '^';
    const char *p = pat + start;
    size_t n = class_atom_len(p);
    if (!n || (p[n] != '+' && p[n] != '*')) return -1;
    int plus = p[n] == '+';
    const char *tail = p + n + 1;
    int end = tail[0] == '$';
    if (tail[end] != '\0' || start != end) return -1;
    int64_t lo = plus && min < 1 ? 1 : min;
    if (max >= 0 && lo > max) return -1; /* no string at all: leave it to the caller's error */
    sbuf b = {0};
    if (start) {
        if (max >= 0) put(&b, "^%.*s{%lld,%lld}$", (int)n, p, (long long)lo, (long long)max);
        else put(&b, "^%.*s{%lld,}$", (int)n, p, (long long)lo);
    } else if (!plus) {
        *any = 1;
        return 0;
    } else {
        char *neg = malloc(n + 32);
        if (!neg) return 0; /* *out NULL: out of memory */
        complement(p, n, neg);
        unanchored_plus(&b, p, n, neg, min, max);
        free(neg);
    }
    if (b.oom) {
        free(b.s);
        return 0;
    }
    *out = b.s;
    return 0;
}

/* Splits a class-run pattern: the atom (at *atom, length *n), + or *, and whether it is anchored
 * at the start and at the end. Returns 0, or -1 for any other shape. */
static int class_run(const char *pat, const char **atom, size_t *n, int *plus, int *start, int *end) {
    *start = pat[0] == '^';
    *atom = pat + *start;
    *n = class_atom_len(*atom);
    if (!*n || ((*atom)[*n] != '+' && (*atom)[*n] != '*')) return -1;
    *plus = (*atom)[*n] == '+';
    const char *tail = *atom + *n + 1;
    *end = tail[0] == '$';
    return tail[*end] == '\0' ? 0 : -1;
}

int js_class_run_universal(const char *pat) {
    const char *a;
    size_t n;
    int plus, start, end;
    return !class_run(pat, &a, &n, &plus, &start, &end) && !plus && !(start && end);
}

int js_class_run_complement(const char *pat, char **out) {
    const char *a;
    size_t n;
    int plus, start, end;
    *out = NULL;
    if (class_run(pat, &a, &n, &plus, &start, &end) || start != end || (!plus && !start)) return -1;
    char *neg = malloc(n + 32);
    if (!neg) return 0;
    complement(a, n, neg);
    sbuf b = {0};
    if (!start) put(&b, "^%s*$", neg); /* no character in C */
    else if (plus) put(&b, "^(?:%.*s*%s[\\s\\S]*)?$", (int)n, a, neg); /* empty, or a first non-C */
    else put(&b, "^%.*s*%s[\\s\\S]*$", (int)n, a, neg);
    free(neg);
    if (b.oom) {
        free(b.s);
        return 0;
    }
    *out = b.s;
    return 0;
}
