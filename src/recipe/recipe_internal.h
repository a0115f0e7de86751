/* recipe_internal.h - helpers shared by the recipe codecs (the src/recipe sources only):
 * the arena that owns a canonical object's strings and arrays, the growable SSE
 * buffer, JSON string escaping, typed getters over the reader's tree (rjson.h)
 * that report type errors with the field path, one-pass field picking, and the
 * jansson helpers of the tree encoders. Not part of the public API. */
#ifndef CINFER_RECIPE_INTERNAL_H
#define CINFER_RECIPE_INTERNAL_H

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "cinfer/recipe.h"
#include "recipe/recipe_json.h"
#include "recipe/rjson.h"

/* ---- arena: zeroed allocations, freed all at once; the first chunk survives reset */
void *ra_alloc(recipe_arena *a, size_t n);
struct recipe_arena_chunk {
    recipe_arena_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};
void *ra_alloc_grow(recipe_arena *a, size_t n); /* the slow path: a new chunk */
/* not zeroed; inline because the JSON reader allocates a few times per container */
static inline void *ra_alloc_raw(recipe_arena *a, size_t n) {
    n = n ? (n + 15) & ~(size_t)15 : 16;
    recipe_arena_chunk *c = a->head;
    if (c && c->cap - c->used >= n) {
        void *p = c->data + c->used;
        c->used += n;
        return p;
    }
    return ra_alloc_grow(a, n);
}
char *ra_strndup(recipe_arena *a, const char *s, size_t n);
void ra_reset(recipe_arena *a);
void ra_free(recipe_arena *a);

/* ---- output buffer (0 ok, -1 out of memory; the failure is sticky: recipe_buf.failed) */
int rb_reserve(recipe_buf *b, size_t extra);
int rb_put(recipe_buf *b, const char *s, size_t n);
int rb_puts(recipe_buf *b, const char *s);
int rb_printf(recipe_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s[0..n) as a quoted JSON string (invalid UTF-8 bytes become U+FFFD). */
int rb_json_str(recipe_buf *b, const char *s, size_t n);
/* Appends a compact dump of j. */
int rb_json(recipe_buf *b, const json_t *j);
int rb_int(recipe_buf *b, int64_t v);
/* "<prefix>[<idx>]<suffix>" into buf without printf (field paths on the parse path). */
const char *path_idx(char *buf, size_t cap, const char *prefix, size_t idx, const char *suffix);
/* Appends s[0..n) with each invalid UTF-8 byte replaced by U+FFFD. */
int rb_put_utf8(recipe_buf *b, const char *s, size_t n);
bool rj_utf8_valid(const char *s, size_t n);
int rb_real(recipe_buf *b, double v); /* shortest text that reads back exactly, always a real (1.0) */

/* ---- jansson accessors (response encoders, stream encoder). Inline so that the length of a
 * literal key is computed at compile time (json_object_get would strlen it on every lookup). */
static inline json_t *jget(const json_t *o, const char *key) { return json_object_getn(o, key, __builtin_strlen(key)); }
static inline const char *jstr(const json_t *o, const char *key) { return json_string_value(jget(o, key)); }
/* New string value without re-validating UTF-8 (inputs came from jansson or were validated). */
static inline json_t *jsnew(const char *s) { return s ? json_stringn_nocheck(s, strlen(s)) : json_null(); }
/* json_object_set_new that ignores NULL values. */
static inline void jset(json_t *o, const char *k, json_t *v) {
    if (v) json_object_set_new_nocheck(o, k, v);
}
static inline void jset_str(json_t *o, const char *k, const char *s) {
    if (s) json_object_set_new_nocheck(o, k, json_stringn_nocheck(s, strlen(s)));
}
static inline void jset_int(json_t *o, const char *k, int64_t v) {
    if (v != RECIPE_UNSET) json_object_set_new_nocheck(o, k, json_integer(v));
}
static inline void jset_real(json_t *o, const char *k, double v) {
    if (!isnan(v)) {
        /* keep integral values integral so 1 round-trips as 1, not 1.0 */
        if (v == (double)(int64_t)v && fabs(v) < 1e15) json_object_set_new_nocheck(o, k, json_integer((json_int_t)v));
        else json_object_set_new_nocheck(o, k, json_real(v));
    }
}
static inline void jset_tri(json_t *o, const char *k, int v) {
    if (v >= 0) json_object_set_new_nocheck(o, k, json_boolean(v));
}

/* Typed checks of a looked-up value `v` (named `key` under `path` in messages): absent/null ->
 * leaves *out untouched, returns 0; wrong type or out of range -> recipe_fail. */
int rjv_str(const rj *v, const char *key, const char **out, recipe_error *err, const char *path);
int rjv_num(const rj *v, const char *key, double *out, double lo, double hi, recipe_error *err, const char *path);
int rjv_int(const rj *v, const char *key, int64_t *out, int64_t lo, int64_t hi, recipe_error *err, const char *path);
int rjv_bool(const rj *v, const char *key, int *out, recipe_error *err, const char *path);
int rjv_obj(const rj *v, const char *key, rj **out, recipe_error *err, const char *path);
/* The same on member `key` of object o (the typed getters the codecs call). */
static inline int jget_str(const rj *o, const char *key, const char **out, recipe_error *err, const char *path) {
    return rjv_str(rj_get(o, key), key, out, err, path);
}
static inline int jget_obj(const rj *o, const char *key, rj **out, recipe_error *err, const char *path) {
    return rjv_obj(rj_get(o, key), key, out, err, path);
}
static inline int jget_bool(const rj *o, const char *key, int *out, recipe_error *err, const char *path) {
    return rjv_bool(rj_get(o, key), key, out, err, path);
}
/* One pass over an object's members instead of one lookup per key: out[i] = the value of
 * keys[i] (NULL when absent; the last one when repeated). Cheaper when several keys are
 * looked up and most are absent (a request body's optional fields, a message's role/content/name...). */
typedef struct jkey {
    const char *name;
    uint32_t sig; /* length | first byte << 8 | last byte << 16: one compare rejects most members */
} jkey;
#define JKEY_SIG(len, first, last) \
    ((uint32_t)(len) | (uint32_t)(unsigned char)(first) << 8 | (uint32_t)(unsigned char)(last) << 16)
/* s: a non-empty string literal shorter than 256 bytes */
#define JKEY(s) \
    { s, JKEY_SIG(sizeof(s) - 1, (s)[0], (s)[sizeof(s) - 2]) }
void jpick(const rj *o, const jkey *keys, size_t n, rj **out);
/* Opaque sub-document -> compact JSON text in the request/response arena (NULL: absent or null). */
#define RAW(r, v) rj_raw(&(r)->arena, (v))
/* JSON text (a RAW field) -> new jansson value for the tree encoders; NULL for NULL or bad text. */
json_t *raw_json(const char *text);

/* ---- shared pieces of the codecs */
/* Content given as a plain string: one TEXT part in the arena (*out, *n = 1, *is_string); 0, or -1 +
 * err when out of memory. */
int string_content(recipe_arena *a, const char *text, recipe_part **out, size_t *n, bool *is_string, recipe_error *err);
/* Joins the text parts of a content value (string or array of typed text parts) into one
 * string in the arena (a single text part is returned as is, not copied); NULL if no text. */
const char *join_text(recipe_arena *a, const recipe_part *parts, size_t n, const char *sep);
recipe_effort effort_parse(const char *s); /* UNSET if NULL/unknown */
int tool_choice_parse_openai(recipe_request *r, const rj *tc, bool responses, recipe_error *err);
/* logit_bias (Chat, Completions): JSON text + parsed r->bias (canonical token-id keys, [-100, 100]). */
int parse_logit_bias(recipe_request *r, rj *lb, recipe_error *err);
/* OpenAI `stop` (Chat, Completions): absent/null, a string, or up to 4 strings (chat.c). */
int parse_openai_stop(recipe_request *r, const rj *stop, recipe_error *err);
/* Common OpenAI (Chat + Responses) sampling / extension fields, from values picked (jpick) with a
 * key table that starts with RECIPE_COMMON_KEYS, so a codec picks its own top-level fields in the
 * same pass. */
enum {
    X_TOP_K,
    X_MIN_P,
    X_REP,
    X_SALT,
    X_CTK,
    X_CINFER,
    X_MIN_TOKENS,
    X_IGNORE_EOS,
    X_INCLUDE_STOP,
    X_SKIP_SPECIAL,
    X_PRIORITY,
    X_STOP_IDS,
    X_GUIDED_JSON,
    X_GUIDED_REGEX,
    X_GUIDED_CHOICE,
    X_GUIDED_GRAMMAR,
    X_STRUCTURED,
    X_COUNT, /* extension keys first */
    S_TEMP = X_COUNT,
    S_TOP_P,
    S_TOP_LOGPROBS,
    S_USER,
    S_METADATA,
    S_PTC,
    S_STREAM,
    S_COUNT
};
#define RECIPE_EXT_KEYS                                                                                         \
    JKEY("top_k"), JKEY("min_p"), JKEY("repetition_penalty"), JKEY("cache_salt"), JKEY("chat_template_kwargs"), \
        JKEY("cinfer"), JKEY("min_tokens"), JKEY("ignore_eos"), JKEY("include_stop_str_in_output"),             \
        JKEY("skip_special_tokens"), JKEY("priority"), JKEY("stop_token_ids"), JKEY("guided_json"),             \
        JKEY("guided_regex"), JKEY("guided_choice"), JKEY("guided_grammar"), JKEY("structured_outputs")
#define RECIPE_COMMON_KEYS                                                                                     \
    RECIPE_EXT_KEYS, JKEY("temperature"), JKEY("top_p"), JKEY("top_logprobs"), JKEY("user"), JKEY("metadata"), \
        JKEY("parallel_tool_calls"), JKEY("stream")
int parse_common_sampling_v(recipe_request *r, rj *const *v, recipe_error *err);
struct rw;
void write_extensions(struct rw *w, const recipe_request *r);
/* One OpenAI function tool definition (Chat: nested under "function"; Responses: flat). */
void write_tool_openai(struct rw *w, const recipe_tool *t, bool responses);
/* The tool_choice value (the key must be set, or a bare value is written); false, writing
 * nothing, when tool_choice is unset. */
bool write_tool_choice_openai(struct rw *w, const recipe_request *r, bool responses);
/* Extension fields every format accepts (top_k, min_p, repetition_penalty, cache_salt,
 * chat_template_kwargs, cinfer, the vLLM extras), from values picked with a key table that starts
 * with RECIPE_EXT_KEYS. */
int parse_extensions_v(recipe_request *r, rj *const *v, recipe_error *err);
/* guided.c: guided_json / _regex / _choice / _grammar and structured_outputs (values picked with
 * RECIPE_EXT_KEYS) into r->guided_*; 400 naming the field for a bad shape or more than one. */
int parse_guided(recipe_request *r, rj *const *v, recipe_error *err);
/* Re-emits r->guided_* as the vLLM field it came as (guided_* or structured_outputs). */
void write_guided(struct rw *w, const recipe_request *r);
/* Image part from a URL; data: URLs also fill media_type/data. */
void image_from_url(recipe_arena *a, recipe_part *p, const char *url);
/* data: URL for a base64 image part (arena string), or its url. */
const char *image_url(recipe_arena *a, const recipe_part *p);
/* Reasoning text of a part: its text, else its Responses summary texts joined by "\n\n". */
const char *reasoning_text(recipe_arena *a, const recipe_part *p);
/* Default response ids when none is given: "<prefix><hex>" (time + address seeded). */
const char *default_id(recipe_arena *a, const char *prefix, const void *obj);
/* Tool arguments text -> object (invalid or non-object JSON -> {} as the doc recommends). */
json_t *args_to_object(const char *args);
/* Mints "<prefix><24 hex>" from a seed. */
void mint_id(char *out, size_t cap, const char *prefix, uint64_t seed);
uint64_t mix64(uint64_t x);

/* shared by the codecs and the stream encoder (defined in chat.c, messages.c, responses.c) */
json_t *usage_chat(const recipe_usage *u);
json_t *usage_messages(const recipe_usage *u);
json_t *usage_responses(const recipe_usage *u);
void synth_signature(char out[72], const char *text, size_t len);
json_t *responses_output(const recipe_response *r, const char *resp_id);
void responses_echo(json_t *o, const recipe_request *req);
void responses_status(json_t *o, recipe_finish f, const char *error_message);

#define RECIPE_PATH 96
/* field paths in error messages are truncated on purpose when absurdly deep */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#endif
