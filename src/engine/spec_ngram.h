/* spec_ngram.h - the n-gram (prompt lookup) drafter over one request's
 * prompt and generated tokens.
 *
 * Index: for every n in [SPEC_NGRAM_MIN, SPEC_NGRAM_MAX] an open-addressing
 * table maps an n-gram to the latest position p whose preceding n tokens
 * are that n-gram (seq[p], its continuation, is known), and a chain links
 * each such p to the previous occurrence of the same n-gram: every earlier
 * continuation of a key is reachable, latest first (the keyed continuations
 * of llama.cpp's ngram-map, kept per position instead of per key). Sized at
 * create for the request's capacity, so proposing never allocates.
 *
 * Proposal, one token at a time (drafted tokens extend the context of the
 * next lookup): the longest n whose last-n-gram occurred before wins; among
 * its last SPEC_NGRAM_WALK occurrences the most frequent continuation is
 * drafted (ties: the latest). Each token carries a confidence, its share of
 * those occurrences (a key seen once: a fixed prior that grows with n); the
 * draft stops where the product of the confidences falls below
 * SPEC_NGRAM_MIN_CONF, so a long verbatim match drafts long and an ambiguous
 * one drafts one or two tokens. The first token is always drafted (a verify
 * of 2 rows costs about what 1 row does): when no n-gram matches (the last
 * token is new to the sequence), the most frequent of the last
 * SPEC_NGRAM_WALK tokens. */
#ifndef CINFER_ENGINE_SPEC_NGRAM_H
#define CINFER_ENGINE_SPEC_NGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/spec_drafter.h"

#define SPEC_NGRAM_MIN 1
#define SPEC_NGRAM_MAX 6
#define SPEC_NGRAM_WALK 16 /* earlier occurrences of a key looked at per drafted token */

extern const spec_drafter_ops spec_ngram_ops;

/* A state for sequences of up to capacity tokens, or NULL (out of memory). */
void *spec_ngram_create(int32_t capacity);

#endif
