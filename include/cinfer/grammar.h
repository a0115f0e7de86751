/* cinfer/grammar.h - the constrained-decoding engine (structured outputs),
 * implemented by src/grammar/. Depends on nothing but the C standard library.
 *
 * Pipeline:
 *   spec (JSON Schema text, json_object, regex, GBNF grammar, choice list)
 *     --cinfer_grammar_compile--> cinfer_grammar (immutable, shareable, refcounted)
 *   model vocabulary (token byte strings + special flags)
 *     --cinfer_grammar_vocab_new--> cinfer_grammar_vocab (immutable token trie, built once per model)
 *   grammar + vocab --cinfer_grammar_matcher_new--> cinfer_grammar_matcher (one per request)
 *     per step: fill_mask -> (sampler picks a token within the mask) -> accept
 *
 * Ownership and threads:
 * - A cinfer_grammar is immutable after compile; it is refcounted (retain/release) and may be
 *   used by any number of matchers on any threads at once. The same holds for a vocab.
 * - A matcher belongs to one request; its functions must not be called concurrently on the
 *   same matcher. A matcher holds a reference to its grammar and borrows its vocab (the vocab
 *   must outlive every matcher made with it).
 * - The compile cache is thread-safe (one mutex); compilation itself runs on the caller's thread
 *   and is bounded by cinfer_grammar_limits (time and size), so it can run off the engine thread.
 *
 * Errors: fallible functions return 0 / non-NULL on success and -1 / NULL on failure, filling
 * a cinfer_grammar_error (may be NULL): a one-line message naming what is unsupported or wrong,
 * plus the offending JSON Schema keyword (e.g. "uniqueItems") and/or byte position in the spec
 * text. An unsupported feature is always an error, never silently ignored.
 *
 * Semantics:
 * - Matching is over bytes. A token is allowed iff its bytes are a viable continuation of the
 *   accepted bytes under the grammar. Special (control) tokens are never allowed, except the
 *   end-of-sequence tokens, which are allowed exactly when the accepted bytes form a complete
 *   match (cinfer_grammar_matcher_is_accepting).
 * - The bitmask is one bit per token id, LSB-first in 32-bit words: token t allowed iff
 *   mask[t / 32] >> (t % 32) & 1.
 * - JSON output (json_schema, json_object) is compact-or-spaced JSON: between JSON tokens the
 *   grammar allows at most one optional space/newline run (see flags), object properties appear in
 *   the schema's `properties` order, additional properties after them. */
#ifndef CINFER_GRAMMAR_H
#define CINFER_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cinfer_grammar cinfer_grammar;
typedef struct cinfer_grammar_vocab cinfer_grammar_vocab;
typedef struct cinfer_grammar_matcher cinfer_grammar_matcher;
typedef struct cinfer_grammar_cache cinfer_grammar_cache;

typedef enum cinfer_grammar_kind {
    CINFER_GRAMMAR_JSON_SCHEMA = 1, /* spec: JSON Schema text (Draft 2020-12 subset) */
    CINFER_GRAMMAR_JSON_OBJECT = 2, /* spec ignored (may be NULL): any JSON object */
    CINFER_GRAMMAR_REGEX = 3, /* spec: ECMAScript-style regex, matched as a whole (anchored) */
    CINFER_GRAMMAR_GBNF = 4, /* spec: llama.cpp GBNF text, start rule "root" */
    CINFER_GRAMMAR_CHOICE = 5, /* spec: JSON array of strings; output is exactly one of them */
} cinfer_grammar_kind;

/* Flags for cinfer_grammar_spec.flags (JSON kinds only). */
enum {
    /* Allow no whitespace at all between JSON tokens (default: optional whitespace, bounded). */
    CINFER_GRAMMAR_JSON_COMPACT = 1u << 0,
    /* Treat `format` as annotation only (Draft 2020-12 default); by default it is asserted. */
    CINFER_GRAMMAR_FORMAT_ANNOTATION = 1u << 1,
};

typedef struct cinfer_grammar_spec {
    cinfer_grammar_kind kind;
    const char *text; /* the spec text (not NUL-terminated necessarily; see len) */
    size_t len;
    uint32_t flags; /* CINFER_GRAMMAR_* flags */
} cinfer_grammar_spec;

typedef struct cinfer_grammar_limits {
    double max_compile_ms; /* wall-clock limit for one compile; <= 0: default 2000 ms */
    uint32_t max_rules; /* grammar size limit (productions); 0: default 200000 */
    uint32_t max_spec_size; /* spec text byte limit; 0: default 4 MiB */
    uint32_t max_depth; /* schema/$ref/regex nesting limit; 0: default 64 */
    uint32_t max_set_items; /* matching limit: Earley items at one byte position; 0: default
                             * 4 x max_rules (a set as large as the grammar is normal, e.g. a big
                             * enum; far more means ambiguity, e.g. a huge counted repetition of
                             * something that can be empty). A continuation that needs more is
                             * not allowed (left out of masks, refused by accept) and the matcher
                             * reports it (cinfer_grammar_matcher_limit_error); a grammar whose
                             * start set is over the limit does not compile. */
} cinfer_grammar_limits;

typedef struct cinfer_grammar_error {
    char msg[512]; /* one line, human readable, e.g. "unsupported keyword 'uniqueItems' at /properties/a" */
    char keyword[64]; /* the unsupported JSON Schema keyword, or "" */
    long position; /* byte offset in the spec text, or -1 when not applicable */
} cinfer_grammar_error;

/* ---- compile ---- */

/* Compiles a spec. limits may be NULL (defaults). Returns a grammar with one reference. */
cinfer_grammar *cinfer_grammar_compile(const cinfer_grammar_spec *spec, const cinfer_grammar_limits *limits,
                                       cinfer_grammar_error *err);
cinfer_grammar *cinfer_grammar_retain(cinfer_grammar *g);
/* NULL is a no-op. Frees on the last reference. */
void cinfer_grammar_release(cinfer_grammar *g);
/* Number of productions (a size measure, for logs and limits). */
size_t cinfer_grammar_size(const cinfer_grammar *g);

/* ---- compile cache (keyed by a hash of kind, flags and text) ---- */

/* capacity: most grammars kept (LRU); 0: default 256. */
cinfer_grammar_cache *cinfer_grammar_cache_new(size_t capacity);
void cinfer_grammar_cache_free(cinfer_grammar_cache *c);
/* Returns a new reference to the cached grammar, compiling (and caching) on a miss. Failed
 * compiles are not cached. *hit (may be NULL) tells whether it was a cache hit. */
cinfer_grammar *cinfer_grammar_cache_get(cinfer_grammar_cache *c, const cinfer_grammar_spec *spec,
                                         const cinfer_grammar_limits *limits, int *hit, cinfer_grammar_error *err);

/* ---- vocabulary (token trie, built once per model) ---- */

typedef struct cinfer_grammar_token {
    const uint8_t *bytes; /* the token's decoded bytes (SPM "▁" already mapped to ' ', byte tokens
                             <0xNN> to the byte, BPE byte-level mapping undone) */
    uint32_t len;
    uint8_t special; /* 1: a control/special token (never allowed except as EOS) */
} cinfer_grammar_token;

/* Copies what it needs. eos_ids: the end-of-sequence/end-of-turn token ids (allowed only when
 * the match is complete). */
cinfer_grammar_vocab *cinfer_grammar_vocab_new(const cinfer_grammar_token *tokens, uint32_t n_tokens,
                                               const uint32_t *eos_ids, uint32_t n_eos, cinfer_grammar_error *err);
void cinfer_grammar_vocab_free(cinfer_grammar_vocab *v);
uint32_t cinfer_grammar_vocab_size(const cinfer_grammar_vocab *v);
/* Words in a mask for this vocabulary: (n_tokens + 31) / 32. */
size_t cinfer_grammar_mask_words(const cinfer_grammar_vocab *v);

/* ---- matcher (one per request) ---- */

cinfer_grammar_matcher *cinfer_grammar_matcher_new(cinfer_grammar *g, const cinfer_grammar_vocab *v,
                                                   cinfer_grammar_error *err);
void cinfer_grammar_matcher_free(cinfer_grammar_matcher *m);
/* An independent copy in the same state (e.g. for n > 1 or beam search). */
cinfer_grammar_matcher *cinfer_grammar_matcher_fork(const cinfer_grammar_matcher *m, cinfer_grammar_error *err);

/* Fills mask (cinfer_grammar_mask_words(v) words) with the tokens allowed next. Allocates only
 * on a miss of the grammar's shared mask cache (a new cache entry; scratch buffers grow
 * geometrically and are reused). Returns the number of allowed tokens (0 after EOS; never 0
 * before, since accept keeps the matcher on a viable prefix). Time: microseconds on a cache hit;
 * a miss walks the vocabulary trie (milliseconds, see docs/grammar.md "Known limits"). */
int cinfer_grammar_matcher_fill_mask(cinfer_grammar_matcher *m, uint32_t *mask, size_t n_words);

/* Advances by one token. Returns 0, or -1 (state unchanged) if the token is not allowed. An EOS
 * token is accepted only when is_accepting; after it the matcher is terminated (every later
 * mask is empty except nothing; accept fails). */
int cinfer_grammar_matcher_accept(cinfer_grammar_matcher *m, uint32_t token, cinfer_grammar_error *err);
/* Advances by raw bytes (e.g. a forced prefix or text outside the vocabulary). All-or-nothing:
 * on -1 the state is unchanged. Counts as one step for rollback. */
int cinfer_grammar_matcher_accept_bytes(cinfer_grammar_matcher *m, const uint8_t *bytes, size_t len,
                                        cinfer_grammar_error *err);
/* Undoes the last n accepted steps (tokens or accept_bytes calls), n <= steps taken. Returns
 * 0 or -1 when n is larger than the history. */
int cinfer_grammar_matcher_rollback(cinfer_grammar_matcher *m, uint32_t n);
/* Steps accepted so far (the rollback history). */
uint32_t cinfer_grammar_matcher_steps(const cinfer_grammar_matcher *m);
/* 1 if the accepted bytes form a complete match (EOS allowed now), else 0. */
int cinfer_grammar_matcher_is_accepting(const cinfer_grammar_matcher *m);
/* 1 once an EOS token was accepted. */
int cinfer_grammar_matcher_is_terminated(const cinfer_grammar_matcher *m);
/* NULL, or a one-line message when some continuation was refused because matching it needed more
 * than max_set_items Earley items at one position (the grammar is too ambiguous for the limit,
 * e.g. a huge counted repetition of something that can be empty). Sticky for the matcher's life:
 * an empty mask with this set means the limit, not the grammar, ended the output. */
const char *cinfer_grammar_matcher_limit_error(const cinfer_grammar_matcher *m);
/* Writes up to cap bytes that every continuation must start with (the forced bytes: while
 * exactly one next byte is possible and the match is not complete). Returns the count. */
size_t cinfer_grammar_matcher_forced_bytes(cinfer_grammar_matcher *m, uint8_t *out, size_t cap);
/* Forced-token fast-forward: if exactly one token is allowed next, stores it in *token and
 * returns 1; else returns 0. Costs one mask computation; the caller may then accept it without
 * running the model's sampler. */
int cinfer_grammar_matcher_forced_token(cinfer_grammar_matcher *m, uint32_t *token);

#ifdef __cplusplus
}
#endif

#endif
