/* textgen.h - deterministic prompt content for the serving benchmark.
 *
 * Everything here is a pure function of its seed (splitmix64), so a workload
 * is reproducible from --seed and a trace block is reproducible from its hash
 * id. Text is space-separated words from a fixed list of common English words,
 * each word followed by one space: a prefix of blocks is then a prefix of the
 * text at a word boundary, which every tokenizer splits the same way up to
 * that boundary (the approximation: "one word ~ one token"; a word may be one
 * to three tokens depending on the vocabulary). Token-id content draws ids
 * uniformly from [lo, hi). Callers: workload.c, tests. */
#ifndef CINFER_BENCHSERVE_TEXTGEN_H
#define CINFER_BENCHSERVE_TEXTGEN_H

#include <stdint.h>

#include "benchserve/bs_buf.h"

/* splitmix64 step: advances *s and returns the next 64-bit value. */
uint64_t bs_rng_next(uint64_t *s);
/* A seed derived from two values (e.g. run seed and session index). */
uint64_t bs_rng_mix(uint64_t a, uint64_t b);
/* Uniform double in [0, 1). */
double bs_rng_unit(uint64_t *s);

/* Appends n words (each followed by a space) drawn with *rng. */
int textgen_words(bs_buf *b, uint64_t *rng, long n);
/* Appends the text of trace block `hash_id`: n words seeded by the id alone. */
int textgen_block_text(bs_buf *b, uint64_t hash_id, long n);
/* Fills out[0..n) with the token ids of trace block `hash_id`, in [lo, hi). */
void textgen_block_ids(int32_t *out, uint64_t hash_id, long n, int32_t lo, int32_t hi);
/* Appends about n words of repetitive code-like text (functions built from a
 * handful of templates with varying names and constants). */
int textgen_code(bs_buf *b, uint64_t *rng, long n);

#endif
