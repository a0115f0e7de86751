/* sampler.h - turns a row of logits into the next token.
 *
 * Pipeline (order matters and is fixed): logit bias -> repetition /
 * presence / frequency penalties over the token history -> (greedy when
 * temperature <= 0: argmax, ties to the lowest id) -> top-k -> temperature ->
 * softmax -> min-p -> top-p -> draw with the sampler's own seeded RNG.
 * A sampler is per request: it owns its RNG state and token-count history, so
 * the same seed and logits give the same tokens on every run and ISA.
 * Penalty semantics follow llama.cpp / vLLM: repetition divides positive
 * logits and multiplies negative ones; presence subtracts once per seen
 * token; frequency subtracts per occurrence. The candidate buffers are
 * allocated once at create (no allocation per token). */
#ifndef CINFER_ENGINE_SAMPLER_H
#define CINFER_ENGINE_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct logit_bias {
    int32_t token;
    float bias;
} logit_bias;

typedef struct sampler_params {
    float temperature; /* <= 0: greedy */
    int32_t top_k; /* <= 0: off */
    float top_p; /* >= 1: off */
    float min_p; /* <= 0: off */
    float repetition_penalty; /* 1: off */
    float presence_penalty; /* 0: off */
    float frequency_penalty; /* 0: off */
    const logit_bias *bias; /* copied at create */
    int32_t n_bias;
    uint64_t seed;
} sampler_params;

/* Defaults: greedy off (temperature 1), everything else off, seed 0. */
sampler_params sampler_default_params(void);

typedef struct sampler sampler;

sampler *sampler_create(const sampler_params *p, int32_t n_vocab);
void sampler_free(sampler *s);
/* Records a token in the penalty history (prompt tokens too if the caller wants
 * repetition penalty to cover them, as vLLM does). */
void sampler_accept(sampler *s, int32_t token);
/* Samples from logits[n_vocab]; modifies logits in place. */
int32_t sampler_sample(sampler *s, float *logits);
/* Speculative verification of one drafted token against the target logits
 * (lossless speculative sampling). p is the distribution sampler_sample would
 * draw from (the whole pipeline above: bias, penalties, top-k, temperature,
 * min-p, top-p); q[n_vocab] is the drafter's distribution after the same
 * pipeline, or NULL for a drafter without probabilities (q one-hot on
 * draft). Greedy: accepted iff draft is the argmax, which is returned.
 * Otherwise: accepted with probability min(1, p(draft)/q(draft)) (returns
 * draft); else returns a draw from max(0, p - q) renormalised. draft < 0:
 * no draft (the bonus position): a plain sample. The returned token is
 * distributed exactly as sampler_sample's, for any q that draft was drawn
 * from. Uses up to two uniforms of the request's RNG; modifies logits. */
int32_t sampler_verify(sampler *s, float *logits, int32_t draft, const float *q, bool *accepted);
/* A drafter's draw: samples like sampler_sample and writes the distribution it drew from into
 * q[n_vocab] (greedy: one-hot on the argmax). Modifies logits. */
int32_t sampler_draft(sampler *s, float *logits, float *q);
/* The sampling parameters (a copy; bias points into the sampler). */
sampler_params sampler_get_params(const sampler *s);

#endif
