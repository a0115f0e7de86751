/* engine_dspark.c - the DSpark-style block drafter (CINFER_SPEC_DSPARK;
 * docs/engine.md "DSpark drafter", docs/deepseek4.md "DSpark"): a whole
 * draft block per request in one pass of the model's DSpark stage, batched
 * over every DSpark request of the step, then the Markov and confidence
 * heads row by row, cut where the confidence no longer pays.
 *
 * Shares the MTP drafter's machinery (engine_mtp.h): KV in the request's
 * draft blocks, caught up by eng_mtp_catchup from the target's exported
 * states (which, on a DSpark model, are the DSpark context: fc over the
 * tapped layers' mean streams), mtp_h = the context of position len - 2.
 * A verify item (committed length len, n_computed = len - 1) with room for
 * cap drafts (cap <= block size) contributes cap rows at positions
 * len - 1 .. len + cap - 2: the last committed token, then the noise token,
 * all conditioned on mtp_h; row j's logits predict token len + j. Those KV
 * entries are scratch (d_computed stays len - 1; the next catch-up rewrites
 * them), as for chained MTP drafts.
 * Row j then takes the Markov bias of the block token before it (the anchor
 * for j = 0, else draft j - 1) and gives its confidence c_j from the same
 * two inputs, before draft j is drawn; drafting stops at the first j whose
 * prefix survival c_0 ... c_j falls below spec_conf_threshold(decoding
 * requests of the step) (spec_confidence < 0: never; the cut rows count in
 * spec_block_cut). Neither the cut nor
 * the later confidence scheduling (eng_mtp_schedule) reads a draft's own
 * token, so verification stays lossless; drafts are drawn by sampler_draft
 * (q for lossless sampling). Passes hold at most cap rows, max_seqs
 * sequences and out_rows output rows; an item that does not fit waits for
 * the next pass of the same step. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/engine_mtp.h"

/* Draws item s's drafts from its rows [row0, row0 + n_rows) of the pass; returns how many it kept. */
static int32_t eng_dspark_draw(cinfer_engine *e, eng_item *it, int32_t row0, int32_t n_rows, float thr) {
    eng_mtp *d = e->mtp;
    eng_req *r = it->r;
    int32_t len = r->prompt_len + r->n_generated, prev = r->seq[len - 1], k = 0;
    double a = 1.0;
    for (int32_t j = 0; j < n_rows; j++) {
        float *lg = d->logits + (int64_t)(row0 + j) * e->n_vocab, c;
        cf_err err;
        if (model_dspark_head(e->fc, d->h_out + (int64_t)(row0 + j) * d->hw, prev, lg, &c, &err)) {
            if (!d->logged) LOG_WARN("engine: DSpark head failed (no drafts): %s", err.msg);
            d->logged = true;
            break;
        }
        a *= c;
        if (a < thr) break; /* decided before draft j is drawn */
        r->spec_conf[j] = c;
        r->seq[len + j] = sampler_draft(r->dsmp, lg, r->spec_q + (int64_t)j * e->n_vocab);
        prev = r->seq[len + j];
        k++;
    }
    e->st.spec_block_cut += (uint64_t)(n_rows - k);
    return k;
}

/* Runs one pass over the items collected in d->items[0..ns) (d->n_draft: their rows) and draws their drafts. */
static void eng_dspark_pass(cinfer_engine *e, int32_t n, int32_t ns, float thr) {
    eng_mtp *d = e->mtp;
    if (ns == 0 || !eng_mtp_forward(e, n, ns, n)) return; /* failed: those items decode plainly */
    for (int32_t s = 0, row = 0; s < ns; s++) {
        d->items[s]->n_draft = eng_dspark_draw(e, d->items[s], row, d->n_draft[s], thr);
        row += d->n_draft[s];
    }
}

void eng_dspark_propose(cinfer_engine *e, eng_stepbuf *sb) {
    eng_mtp *d = e->mtp;
    int32_t n_dec = 0, n = 0, ns = 0;
    for (int32_t i = 0; i < sb->n_items; i++) n_dec += sb->items[i].kind == SCHED_DECODE;
    float thr = e->opt.spec_confidence < 0 ? 0.0f : spec_conf_threshold(n_dec);
    size_t hb = (size_t)d->hw * sizeof(float);
    for (int32_t i = 0; i < sb->n_items; i++) {
        eng_item *it = &sb->items[i];
        eng_req *r = it->r;
        if (r->drafter.kind != CINFER_SPEC_DSPARK || it->kind != SCHED_DECODE || it->n_draft <= 0) continue;
        int32_t len = r->prompt_len + r->n_generated;
        int32_t cap = it->n_draft < d->ds.block_size ? it->n_draft : d->ds.block_size;
        if (cap > d->cap) cap = d->cap; /* a pass's rows (max_batch_tokens may be below the block) */
        if (cap > d->out_rows) cap = d->out_rows;
        if (n + cap > d->cap || n + cap > d->out_rows || ns == e->opt.max_seqs) { /* full: run what we have */
            eng_dspark_pass(e, n, ns, thr);
            n = ns = 0;
        }
        it->n_draft = 0; /* until drafted */
        it->n_tokens = 1;
        if (r->d_computed != len - 1) continue; /* not caught up */
        while (cap > 0 && !eng_draft_room(e, r, len - 1 + cap)) cap--;
        if (cap == 0) continue;
        d->seqs[ns] = (fwd_seq){.blocks = r->dbptr, .n_blocks = r->n_dblocks};
        for (int32_t j = 0; j < cap; j++, n++) {
            d->tokens[n] = j == 0 ? r->seq[len - 1] : d->ds.noise_token;
            d->pos[n] = len - 1 + j;
            d->seq[n] = ns;
            d->rows[n] = n;
            if (r->mtp_h_ok) memcpy(d->h_in + (int64_t)n * d->hw, r->mtp_h, hb);
            else memset(d->h_in + (int64_t)n * d->hw, 0, hb);
        }
        d->items[ns] = it;
        d->n_draft[ns++] = cap;
    }
    eng_dspark_pass(e, n, ns, thr);
}
