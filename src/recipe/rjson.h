/* rjson.h - the recipe codecs' JSON reader: one pass over the body text builds a
 * read-only tree in the request's arena (no allocation per value beyond the arena's
 * bump pointer, no hashing), strings unescaped and NUL-terminated in one pooled
 * copy, and every value remembers its span of the source text so that opaque
 * sub-documents (JSON schemas, metadata, cache_control...) are passed on as
 * compact text verbatim instead of being rebuilt.
 *
 * Accepts exactly what jansson's json_loads (flags 0) accepts for an object or
 * array body: RFC 8259 syntax, valid UTF-8, no \u0000 (strings are C strings),
 * paired surrogate escapes, integers within int64, finite reals, nesting <= 2048.
 * Duplicate keys: lookups return the last occurrence (jansson keeps the last).
 *
 * Opaque objects: an object that is the value of a member named parameters,
 * input_schema, schema, metadata, cache_control or logit_bias (JSON Schemas and
 * user data that the codecs pass on as text) is validated but not built; it is
 * built on first access (rj_getn / rj_items), so every accessor sees the same tree.
 *
 * Lifetime: the tree and its strings live in the arena passed to rj_parse (freed
 * with the recipe_request/recipe_response that owns it); the raw spans point into
 * the caller's text, so rj_raw and first accesses to opaque objects must happen
 * while that text is alive (during the codec's parse). The
 * accessors tolerate NULL like jansson's (absent member -> NULL -> "not a string").
 * Internal to src/recipe. */
#ifndef CINFER_RECIPE_RJSON_H
#define CINFER_RECIPE_RJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cinfer/recipe.h"

typedef enum rj_type { RJ_NULL = 0, RJ_FALSE, RJ_TRUE, RJ_INT, RJ_REAL, RJ_STRING, RJ_ARRAY, RJ_OBJECT } rj_type;

typedef struct rj {
    uint8_t type;
    bool compact; /* the source span has no insignificant whitespace */
    bool lazy; /* an opaque OBJECT not built yet: u.arena, n == 0 (see rj_items) */
    uint32_t klen; /* object member: key length */
    uint32_t ksig; /* object member: JKEY_SIG of the key (recipe_internal.h), 0 if empty or >= 256 bytes */
    const char *key; /* object member: key (NUL-terminated), else NULL */
    const char *raw; /* span of the source text */
    size_t raw_len;
    size_t n; /* STRING: byte length; ARRAY/OBJECT: element count */
    union {
        int64_t i;
        double d;
        const char *s; /* STRING (NUL-terminated, pooled) */
        struct rj **items; /* ARRAY elements / OBJECT members (each with key) */
        recipe_arena *arena; /* lazy: where to build it */
    } u;
} rj;

/* Parses text[0..len) (an object or an array, surrounding whitespace allowed) into arena a.
 * NULL on failure with a one-line reason in why (e.g. "invalid UTF-8 at byte 12"). */
rj *rj_parse(recipe_arena *a, const char *text, size_t len, char *why, size_t why_cap);
/* Every string of the pool is preceded by a tag byte (bytes never found in UTF-8): CLEAN when
 * it was read without escapes and holds only printable ASCII other than '"' and '\\', so that
 * its JSON form is '"' + the bytes + '"' (the writer copies it without scanning). */
#define RJ_TAG_CLEAN 0xFF
#define RJ_TAG_OTHER 0xFE
typedef struct rj_pool {
    const char *lo, *hi; /* the string pool of one parse: [lo, hi) */
} rj_pool;
/* rj_parse that also reports where its string pool is (NULLs on failure to allocate). */
rj *rj_parse_pool(recipe_arena *a, const char *text, size_t len, char *why, size_t why_cap, rj_pool *pool);
/* Whether s, a string of the pool p (or any other string), is tagged clean. */
static inline bool rj_pool_clean(const rj_pool *p, const char *s) {
    uintptr_t x = (uintptr_t)s;
    return x > (uintptr_t)p->lo && x < (uintptr_t)p->hi && (unsigned char)s[-1] == RJ_TAG_CLEAN;
}

/* Whether s[0..n) is exactly one JSON object that json_loads would accept (no allocation). */
bool rj_text_is_object(const char *s, size_t n);

static inline bool rj_is_null(const rj *v) { return v && v->type == RJ_NULL; }
static inline bool rj_is_absent(const rj *v) { return !v || v->type == RJ_NULL; } /* missing or null */
static inline bool rj_is_string(const rj *v) { return v && v->type == RJ_STRING; }
static inline bool rj_is_object(const rj *v) { return v && v->type == RJ_OBJECT; }
static inline bool rj_is_array(const rj *v) { return v && v->type == RJ_ARRAY; }
static inline bool rj_is_true(const rj *v) { return v && v->type == RJ_TRUE; }
static inline bool rj_is_boolean(const rj *v) { return v && (v->type == RJ_TRUE || v->type == RJ_FALSE); }
static inline bool rj_is_integer(const rj *v) { return v && v->type == RJ_INT; }
static inline bool rj_is_number(const rj *v) { return v && (v->type == RJ_INT || v->type == RJ_REAL); }
static inline const char *rj_str(const rj *v) { return v && v->type == RJ_STRING ? v->u.s : NULL; }
static inline size_t rj_strlen(const rj *v) { return v && v->type == RJ_STRING ? v->n : 0; }
static inline int64_t rj_int(const rj *v) { return v && v->type == RJ_INT ? v->u.i : 0; }
static inline double rj_num(const rj *v) {
    return !v ? 0 : v->type == RJ_INT ? (double)v->u.i : v->type == RJ_REAL ? v->u.d : 0;
}
static inline size_t rj_size(const rj *v) { /* elements of an array (0 otherwise) */
    return v && v->type == RJ_ARRAY ? v->n : 0;
}
static inline rj *rj_at(const rj *v, size_t i) { return v && v->type == RJ_ARRAY && i < v->n ? v->u.items[i] : NULL; }
/* Builds a lazy (opaque) object in place; false if out of memory (it stays empty). */
bool rj_expand(rj *o);
/* Members of an object (built if lazy); NULL if none. */
static inline rj **rj_items(const rj *o) {
    if (o->lazy) rj_expand((rj *)o);
    return o->u.items;
}
/* Member `key` (length klen) of object o, the last one if repeated; NULL if absent or o is no object. */
rj *rj_getn(const rj *o, const char *key, size_t klen);
/* inline so that the length of a literal key is computed at compile time */
static inline rj *rj_get(const rj *o, const char *key) { return rj_getn(o, key, __builtin_strlen(key)); }
static inline const char *rj_gets(const rj *o, const char *key) { return rj_str(rj_get(o, key)); }

#define rj_array_foreach(a, i, v) for ((i) = 0; (i) < rj_size(a) && ((v) = rj_at((a), (i))); (i)++)

/* v as compact JSON text (NUL-terminated; the source span itself when it had no
 * whitespace, else a whitespace-stripped copy in the arena). NULL for absent or null values. */
const char *rj_raw(recipe_arena *a, const rj *v);

#endif
