/* writer.h - one JSON-emitting interface with two backends, so each encoder is
 * written once: TEXT appends compact JSON to a recipe_buf (the fast path: no
 * jansson allocation per value), TREE builds a jansson value. Encoders call
 * rw_obj/rw_arr/rw_end and rw_k* (key + value) in order; keys are never repeated
 * within an object and nothing is retracted, so both backends give the same JSON.
 * Internal to src/recipe (request encoders in chat.c, messages.c, responses.c). */
#ifndef CINFER_RECIPE_WRITER_H
#define CINFER_RECIPE_WRITER_H

#include "recipe/recipe_internal.h"

#define RW_MAX_DEPTH 64

typedef struct rw {
    recipe_buf *buf; /* TEXT backend when non-NULL */
    json_t *stack[RW_MAX_DEPTH]; /* TREE backend: open containers */
    bool first[RW_MAX_DEPTH]; /* TEXT backend: no element written yet */
    bool is_obj[RW_MAX_DEPTH];
    int depth;
    const char *key; /* key for the next value (inside an object) */
    size_t keylen;
    json_t *root;
    bool failed;
    rj_pool clean; /* TEXT: strings of this pool tagged clean are copied unscanned */
} rw;

void rw_init_text(rw *w, recipe_buf *out);
void rw_init_tree(rw *w);
/* TREE: the finished value (new reference) or NULL on failure; TEXT: NULL. */
json_t *rw_finish(rw *w);

/* inline so that the length of a literal key is computed at compile time */
static inline void rw_key(rw *w, const char *k) {
    w->key = k;
    w->keylen = __builtin_strlen(k);
}
void rw_obj(rw *w);
void rw_arr(rw *w);
void rw_end(rw *w);
void rw_str(rw *w, const char *s); /* NULL -> null */
void rw_strn(rw *w, const char *s, size_t n);
void rw_int(rw *w, int64_t v);
void rw_real(rw *w, double v); /* integral values written as integers */
void rw_bool(rw *w, bool v);
void rw_null(rw *w);
void rw_raw(rw *w, const char *json_text); /* embeds JSON text (a RAW field) verbatim; NULL -> null */
/* Tool arguments as an object: valid object text is copied verbatim (TEXT) / parsed (TREE);
 * anything else becomes {} (protocols.md §4.6). */
void rw_args_object(rw *w, const char *args);

/* key + value helpers that skip unset values */
static inline void rw_kstr(rw *w, const char *k, const char *s) {
    if (s) rw_key(w, k), rw_str(w, s);
}
static inline void rw_kint(rw *w, const char *k, int64_t v) {
    if (v != RECIPE_UNSET) rw_key(w, k), rw_int(w, v);
}
static inline void rw_kreal(rw *w, const char *k, double v) {
    if (!isnan(v)) rw_key(w, k), rw_real(w, v);
}
static inline void rw_ktri(rw *w, const char *k, int v) {
    if (v >= 0) rw_key(w, k), rw_bool(w, v);
}
static inline void rw_kraw(rw *w, const char *k, const char *json_text) {
    if (json_text) rw_key(w, k), rw_raw(w, json_text);
}
static inline void rw_kobj(rw *w, const char *k) { rw_key(w, k), rw_obj(w); }
static inline void rw_karr(rw *w, const char *k) { rw_key(w, k), rw_arr(w); }

#endif
