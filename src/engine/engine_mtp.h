/* engine_mtp.h - the scratch shared by the engine's two drafters that run
 * the model's MTP blocks: the chained MTP drafter (engine_mtp.c) and the
 * DSpark-style block drafter (engine_dspark.c). Both keep their KV in the
 * request's draft blocks and catch it up the same way (eng_mtp_catchup);
 * they differ in how drafts are made. Not a public header.
 *
 * Owned by the engine (e->mtp), sized at create: rows per pass `cap` (the
 * forward context's max_tokens), output rows `out_rows` (max_seqs, or the
 * DSpark block if larger); nothing is allocated per step. */
#ifndef CINFER_ENGINE_MTP_H
#define CINFER_ENGINE_MTP_H

#include "engine/engine_internal.h"

typedef struct eng_mtp {
    int64_t hw; /* hidden floats per row */
    int32_t cap; /* rows per pass (the forward context's max_tokens) */
    int32_t out_rows; /* rows of h_out and logits */
    int32_t *tokens, *pos, *seq, *rows;
    fwd_seq *seqs;
    float *h_in; /* cap x hw: each row's conditioning state */
    float *h_out; /* out_rows x hw: each output row's own state (chained: the next step's input) */
    float *logits; /* out_rows x n_vocab */
    eng_item **items; /* per batch sequence */
    int32_t *n_draft, *keep; /* confidence scheduling: per drafting item (max_seqs) */
    spec_cand *cand; /* max_seqs x CINFER_SPEC_MAX_K */
    float *conf; /* max_seqs x CINFER_SPEC_MAX_K */
    bool logged; /* a failed pass was logged */
    model_dspark_info ds; /* the model's DSpark drafter (block_size 0: none) */
    bool dspark; /* the dspark drafter is usable (else: dspark_why) */
    char dspark_why[160];
} eng_mtp;

/* Whether r drafts with the MTP blocks (chained MTP or DSpark): hidden-state export, MTP KV and catch-up. */
static inline bool eng_mtp_is(const eng_req *r) {
    return r->drafter.kind == CINFER_SPEC_MTP || r->drafter.kind == CINFER_SPEC_DSPARK;
}

/* One pass of MTP block 0 over rows [0, n) of sequences [0, n_seqs); n_out output rows (d->rows, <= out_rows),
 * exporting their states into h_out. False (logged once) on failure. */
bool eng_mtp_forward(cinfer_engine *e, int32_t n, int32_t n_seqs, int32_t n_out);

#endif
