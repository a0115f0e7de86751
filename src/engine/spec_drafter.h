/* spec_drafter.h - the drafter interface of speculative decoding
 * (docs/engine.md "Speculative decoding") and the per-request draft-length
 * policy.
 *
 * A drafter proposes up to k tokens that continue a sequence, optionally with
 * its probability distribution at each drafted position (q, n_vocab floats
 * per token, after the request's sampling pipeline); a drafter without
 * probabilities returns has_q = false and verification treats q as one-hot.
 * One drafter state per request, created at submit (no allocation per step),
 * owned by the request and freed with it. The state sees the committed
 * sequence only (prompt + generated tokens, which only grow: rejected drafts
 * never enter it), so preemption and recomputation need nothing from it.
 * Drafters that keep KV or hidden state (draft models, MTP) get the rollback
 * call: after verification, positions >= n_valid of what they computed are
 * stale.
 *
 * Implementations: spec_ngram.c (prompt lookup). */
#ifndef CINFER_ENGINE_SPEC_DRAFTER_H
#define CINFER_ENGINE_SPEC_DRAFTER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct spec_drafter_ops {
    const char *name;
    /* Proposes up to k tokens continuing seq[0..n) into out[0..k); returns how many (0: no
     * proposal). q: room for k * n_vocab floats, filled (and *has_q set) only by drafters with
     * probabilities. */
    int32_t (*propose)(void *state, const int32_t *seq, int32_t n, int32_t k, int32_t *out, float *q, bool *has_q);
    /* The sequence is committed up to n_valid tokens; anything the drafter computed past it is stale. */
    void (*rollback)(void *state, int32_t n_valid);
    void (*free)(void *state);
} spec_drafter_ops;

typedef struct spec_drafter {
    const spec_drafter_ops *ops; /* NULL: no drafter */
    void *state;
    int32_t kind; /* cinfer_spec_drafter */
} spec_drafter;

/* Creates the drafter of `kind` (cinfer_spec_drafter, not DEFAULT/OFF) for a
 * sequence of at most capacity tokens. */
int spec_drafter_create(int32_t kind, int32_t capacity, spec_drafter *out, cf_err *err);
void spec_drafter_free(spec_drafter *d);

/* Draft-length policy of one request: acceptance rate as an exponential moving average, a
 * back-off when drafts keep failing. A drafter whose drafts cost nothing to make (n-gram lookup)
 * never backs off, and while it decodes alone asks for at least SPEC_POLICY_FREE_K tokens: a
 * verify of up to 1 + SPEC_POLICY_FREE_K rows costs about one row on a memory-bound decode
 * (bench_verify_cost), so a wrong guess there is nearly free (with other sequences in the step the
 * rows add up and are not); drafters that run a model (draft model, MTP) pay per draft. */
#define SPEC_POLICY_FREE_K 3

typedef struct spec_policy {
    int32_t k_max; /* the request's k */
    int32_t k_min; /* drafts asked for however low the acceptance (SPEC_POLICY_FREE_K or 1) */
    bool free_drafts; /* drafting costs no forward of its own: no back-off */
    float accept_rate; /* EMA of accepted / drafted */
    int32_t idle; /* steps to skip drafting (back-off after repeated failures) */
    int32_t fails; /* verifies in a row that accepted nothing */
} spec_policy;

void spec_policy_init(spec_policy *p, int32_t k_max, bool free_drafts);
/* Draft tokens to ask for this step, given at most `cap` (batch share) and whether the sequence
 * decodes alone this step; 0: plain decode. */
int32_t spec_policy_want(spec_policy *p, int32_t cap, bool alone);
/* After a verify of `drafted` tokens that accepted `accepted`; drafted 0 (the drafter found
 * nothing) counts as a miss for the back-off. */
void spec_policy_update(spec_policy *p, int32_t drafted, int32_t accepted);

#endif
