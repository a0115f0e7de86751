/* spec_ngram.h - the n-gram (prompt lookup) drafter: an incremental suffix
 * index over one request's prompt and generated tokens. For n from
 * SPEC_NGRAM_MAX down to SPEC_NGRAM_MIN it looks up the latest earlier
 * occurrence of the sequence's last n tokens and proposes what followed it
 * (continuing periodically past the end of the sequence, so a loop of
 * period < k is proposed whole). Index: one open-addressing table per n,
 * n-gram -> latest position p whose preceding n tokens are that n-gram
 * (seq[p] is known); sized at create for the request's capacity, so
 * proposing never allocates. Collisions are resolved by comparing tokens. */
#ifndef CINFER_ENGINE_SPEC_NGRAM_H
#define CINFER_ENGINE_SPEC_NGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/spec_drafter.h"

#define SPEC_NGRAM_MIN 1
#define SPEC_NGRAM_MAX 4

extern const spec_drafter_ops spec_ngram_ops;

/* A state for sequences of up to capacity tokens, or NULL (out of memory). */
void *spec_ngram_create(int32_t capacity);

#endif
