/* json_schema.h - the JSON Schema compiler's shared context, used by json_schema.c (dispatch,
 * $ref, combinators), json_types.c (the per-type rules) and json_format.c (`format`).
 * A js_ctx lives for one compile; refs memoizes one nonterminal per $ref target so recursive
 * schemas become recursive rules. `path` is the JSON pointer of the subschema being compiled,
 * for error messages. */
#ifndef CINFER_GRAMMAR_JSON_SCHEMA_H
#define CINFER_GRAMMAR_JSON_SCHEMA_H

#include <jansson.h>

#include "grammar/grammar_impl.h"
#include "grammar/json_rules.h"

typedef struct js_ref {
    char *ptr;
    int32_t nt;
} js_ref;

typedef struct js_ctx {
    gr_cfg *g;
    js_rules r;
    json_t *root;
    uint32_t flags;
    cinfer_grammar_limits limits;
    cinfer_grammar_error *err;
    int failed;
    js_ref *refs;
    uint32_t n_refs, cap_refs;
    js_ref *pats; /* string rules by regex (pattern/format): one nonterminal per distinct regex */
    uint32_t n_pats, cap_pats;
    char path[256];
} js_ctx;

/* Frees what c's memos (refs, pats) hold. */
void js_ctx_release(js_ctx *c);
/* Fills err (once) naming keyword at the current path. Returns -1. */
int32_t js_fail(js_ctx *c, const char *keyword, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The rules for schema s (a boolean or an object); depth: remaining nesting budget. */
int32_t js_schema(js_ctx *c, const json_t *s, uint32_t depth);

/* json_types.c: one JSON type under the type-specific keywords of s. */
int32_t js_type_string(js_ctx *c, const json_t *s);
int32_t js_type_integer(js_ctx *c, const json_t *s);
int32_t js_type_number(js_ctx *c, const json_t *s);
int32_t js_type_array(js_ctx *c, const json_t *s, uint32_t depth);
int32_t js_type_object(js_ctx *c, const json_t *s, uint32_t depth);

/* json_format.c: the regex (anchored, ECMAScript syntax) for a `format` name, or NULL. */
const char *js_format_regex(const char *format);
/* json_pattern_len.c: a pattern that is one character class repeated (^C+$, ^C*$, C+, C*) under
 * minLength `min` / maxLength `max` (-1: none). Returns 0 when handled: *any = 1 if the pattern
 * matches every string (the limits alone apply), else *out is the bounded regex (caller frees;
 * NULL: out of memory). Returns -1 for any other pattern or an empty intersection. */
int js_class_run_with_length(const char *pat, int64_t min, int64_t max, char **out, int *any);
/* 1 if pat is a class run that matches every string (C*, ^C*, C*$). */
int js_class_run_universal(const char *pat);
/* The names a class-run pattern does not match, as an anchored regex in *out (caller frees; NULL:
 * out of memory). Returns 0, or -1 for any other pattern (or one that matches every name). */
int js_class_run_complement(const char *pat, char **out);

#endif
