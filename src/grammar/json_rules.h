/* json_rules.h - CFG building blocks for JSON text, shared by the JSON Schema compiler: the
 * whitespace rule, any JSON value, strings (free, length-bounded, "any string except these"),
 * numbers, integers in a range, integers that are multiples of k, and the canonical serialization
 * of a JSON value as a literal.
 * The js_rules struct memoizes the shared nonterminals (built on first use) so a schema with many
 * free strings shares one `string` rule. All functions return a nonterminal or -1 (limit). */
#ifndef CINFER_GRAMMAR_JSON_RULES_H
#define CINFER_GRAMMAR_JSON_RULES_H

#include <jansson.h>
#include <stdint.h>

#include "grammar/cfg.h"

#define JS_LEN_MEMO 64

typedef struct js_rules {
    gr_cfg *g;
    int compact; /* no whitespace between tokens */
    int32_t ws; /* optional whitespace (or empty) */
    int32_t any; /* any JSON value */
    int32_t string; /* a JSON string literal */
    int32_t chr; /* one character inside a string literal */
    int32_t number; /* any JSON number */
    int32_t digits; /* [0-9]+ */
    int32_t frac_exp; /* (\.[0-9]+)?([eE][+-]?[0-9]+)? */
    int32_t str_rest; /* js_char* '"': the rest of a string literal */
    int32_t non_ascii; /* one non-ASCII character */
    int32_t escapes; /* the canonical escapes: \" \\ and control characters */
    /* length-limited string literals made so far, shared by every schema with the same limits */
    struct {
        uint32_t min;
        int64_t max;
        int32_t nt;
    } lens[JS_LEN_MEMO];
    uint32_t n_lens;
} js_rules;

void js_rules_init(js_rules *r, gr_cfg *g, int compact);
int32_t js_ws(js_rules *r);
int32_t js_any(js_rules *r);
int32_t js_string(js_rules *r);
int32_t js_char(js_rules *r);
int32_t js_number(js_rules *r);
/* The exact bytes s as a nonterminal. */
int32_t js_lit(js_rules *r, const char *s);
/* "..." with between min and max characters (max < 0: unbounded). */
int32_t js_string_len(js_rules *r, uint32_t min, int64_t max);
/* A JSON string literal whose decoded value is none of names[0..n) (names are raw UTF-8). */
int32_t js_string_except(js_rules *r, const char *const *names, uint32_t n);
/* A JSON string literal whose value is exactly s (canonical encoding). */
int32_t js_string_value(js_rules *r, const char *s, size_t len);
/* Canonical integers (no leading zeros, "-0" excluded) in [lo, hi]; has_lo/has_hi: bound present. */
int32_t js_int_range(js_rules *r, int has_lo, int64_t lo, int has_hi, int64_t hi);
/* Canonical integers that are multiples of k (k >= 1). */
int32_t js_int_multiple(js_rules *r, uint64_t k);
/* The literal serialization of v (compact, keys in their order). */
int32_t js_value_literal(js_rules *r, const json_t *v);

#endif
