/* engine_mtp.c - the MTP drafter (CINFER_SPEC_MTP): the model's own
 * multi-token-prediction block (DeepSeek V3 next-n layer, V4 MTP block;
 * model.h "MTP") proposes the drafts, conditioned on the target's hidden
 * states, batched over every drafting request of a step, on the engine
 * thread while the executor is idle (commit and assembly of a step; the MTP
 * passes run on the engine's own forward context, whose scratch the target
 * pass no longer uses then).
 *
 * MTP entry of position p: the pair (h_{p-1}, t_p), h the target's hidden
 * state of position p - 1 (zeros for p = 0, as llama.cpp), its KV in the
 * request's MTP blocks (dblocks: blocks of the engine's pool, like the draft
 * model's, released with the target's on preemption and finish); its output
 * predicts t_{p+1}.
 * State per request: d_computed = positions with exact MTP KV; mtp_h = the
 * target's hidden state of position d_computed - 1 (mtp_h_ok). Invariant:
 * d_computed <= n_computed.
 *   commit (eng_mtp_catchup): every item of an MTP request exported the
 *     hidden state of each of its rows (fwd_batch.n_hidden); once the verify
 *     settled n_computed, entries [d_computed, n_computed) are computed with
 *     the exported states (positions of a prefix-cache hit, whose target
 *     hidden states were never computed, get h = 0: a weaker context for the
 *     MTP block, never a wrong output), in passes of at most max_batch_tokens
 *     rows; mtp_h = the state of n_computed - 1.
 *   assembly (eng_mtp_propose): a verify item (committed length len,
 *     n_computed = len - 1) drafts chained steps: step 1 feeds t_{len-1} at
 *     position len - 1 with mtp_h, step j the previous draft at len + j - 2
 *     with the MTP block's own exported hidden state; each step is one MTP
 *     forward over all requests still drafting. Those entries are scratch:
 *     d_computed stays at len - 1 and the next catch-up rewrites them with
 *     the target's states. MTP block 0 serves every step (DeepSeek's MTP-1
 *     chained; further blocks are not used, see docs/engine.md).
 * Drafts are drawn with the request's sampling parameters (no penalties) by
 * sampler_draft, which gives q for lossless verification. Blocks come from
 * what the pool has; without them a request drafts fewer (or catches up
 * later, with h = 0 for the positions it missed).
 * DSpark requests (engine_dspark.c) share everything here but the drafting:
 * on a model with DSpark tensors the exported state is the DSpark context and
 * MTP block 0 is the DSpark stage, so chained MTP is refused there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/engine_mtp.h"

int eng_mtp_open(cinfer_engine *e, cf_err *err) {
    model_mtp_info mi;
    model_mtp_info_get(e->m, e->opt.block_tokens, &mi);
    if (mi.n_blocks <= 0 || mi.hidden_floats <= 0) return 0; /* no MTP: requests asking for it get a 400 */
    if (mi.block_floats > kv_pool_block_floats(e->kv)) {
        LOG_WARN("engine: the MTP block's KV (%lld floats per block) is larger than a target block (%lld): no MTP "
                 "drafter",
                 (long long)mi.block_floats, (long long)kv_pool_block_floats(e->kv));
        return 0;
    }
    eng_mtp *d = calloc(1, sizeof *d);
    if (!d) return cf_fail(err, "out of memory");
    e->mtp = d;
    d->hw = mi.hidden_floats;
    d->cap = e->opt.max_batch_tokens;
    model_dspark_info_get(e->m, &d->ds);
    d->dspark = d->ds.block_size > 0 && d->ds.n_stages == 1;
    if (d->ds.block_size <= 0)
        snprintf(d->dspark_why, sizeof d->dspark_why, "the model has no DSpark tensors (dspark.*; docs/deepseek4.md)");
    else if (d->ds.n_stages != 1)
        snprintf(d->dspark_why, sizeof d->dspark_why,
                 "the model's DSpark drafter has %d stages; cinfer runs one (docs/deepseek4.md \"DSpark\")",
                 d->ds.n_stages);
    d->out_rows = e->opt.max_seqs > d->ds.block_size ? e->opt.max_seqs : d->ds.block_size;
    size_t bt = (size_t)d->cap, ns = (size_t)e->opt.max_seqs, hw = (size_t)d->hw, no = (size_t)d->out_rows;
    d->tokens = malloc(bt * sizeof(int32_t));
    d->pos = malloc(bt * sizeof(int32_t));
    d->seq = malloc(bt * sizeof(int32_t));
    d->rows = malloc(bt * sizeof(int32_t));
    d->seqs = malloc((bt < ns ? ns : bt) * sizeof(fwd_seq));
    d->items = malloc(ns * sizeof(eng_item *));
    d->h_in = malloc(bt * hw * sizeof(float));
    d->h_out = malloc(no * hw * sizeof(float));
    d->logits = malloc(no * (size_t)e->n_vocab * sizeof(float));
    d->n_draft = malloc(ns * sizeof(int32_t));
    d->keep = malloc(ns * sizeof(int32_t));
    d->cand = malloc(ns * CINFER_SPEC_MAX_K * sizeof(spec_cand));
    d->conf = malloc(ns * CINFER_SPEC_MAX_K * sizeof(float));
    for (int i = 0; i < 2; i++) { /* the target's export, per step buffer */
        e->sb[i].hidden = malloc(bt * hw * sizeof(float));
        e->sb[i].hid_rows = malloc(bt * sizeof(int32_t));
        if (!e->sb[i].hidden || !e->sb[i].hid_rows) return cf_fail(err, "out of memory for the MTP hidden states");
    }
    if (!d->tokens || !d->pos || !d->seq || !d->rows || !d->seqs || !d->items || !d->h_in || !d->h_out || !d->logits ||
        !d->n_draft || !d->keep || !d->cand || !d->conf)
        return cf_fail(err, "out of memory for the MTP drafter's scratch");
    return 0;
}

void eng_mtp_close(cinfer_engine *e) {
    eng_mtp *d = e->mtp;
    if (!d) return;
    for (int i = 0; i < 2; i++) {
        free(e->sb[i].hidden);
        free(e->sb[i].hid_rows);
        e->sb[i].hidden = NULL;
        e->sb[i].hid_rows = NULL;
    }
    free(d->tokens);
    free(d->pos);
    free(d->seq);
    free(d->rows);
    free(d->seqs);
    free(d->items);
    free(d->h_in);
    free(d->h_out);
    free(d->logits);
    free(d->n_draft);
    free(d->keep);
    free(d->cand);
    free(d->conf);
    free(d);
    e->mtp = NULL;
}

int eng_mtp_check(const cinfer_engine *e, int32_t kind, cf_err *err) {
    const eng_mtp *d = e->mtp;
    model_mtp_info mi;
    model_mtp_info_get(e->m, e->opt.block_tokens, &mi);
    if (!d && mi.n_blocks > 0 && mi.hidden_floats > 0)
        return cf_fail(err,
                       "the %s drafter: the model's MTP block KV (%lld floats per KV block) does not fit a target KV "
                       "block (%lld floats)",
                       cinfer_spec_drafter_name(kind), (long long)mi.block_floats,
                       (long long)kv_pool_block_floats(e->kv));
    if (kind == CINFER_SPEC_MTP && !d)
        return cf_fail(err, "the mtp drafter needs a model with an MTP block (deepseek2 nextn_predict_layers, "
                            "deepseek4 MTP blocks); this model has none");
    if (kind == CINFER_SPEC_MTP && d->ds.block_size > 0)
        return cf_fail(err, "the mtp drafter: this model's MTP blocks are DSpark stages (use the dspark drafter)");
    if (kind == CINFER_SPEC_DSPARK && !d)
        return cf_fail(err, "the dspark drafter needs a deepseek4 model with DSpark tensors (dspark.*) and an MTP "
                            "block; this model has none");
    if (kind == CINFER_SPEC_DSPARK && !d->dspark) return cf_fail(err, "the dspark drafter: %s", d->dspark_why);
    return 0;
}

int eng_mtp_req_init(cinfer_engine *e, eng_req *q, cf_err *err) {
    if (eng_draft_req_init(e, q, err)) return -1; /* the MTP KV table and the draft sampler */
    q->mtp_h = malloc((size_t)e->mtp->hw * sizeof(float));
    if (!q->mtp_h) return cf_fail(err, "out of memory for the MTP drafter");
    q->mtp_h_ok = false;
    return 0;
}

void eng_mtp_mark(cinfer_engine *e, eng_stepbuf *sb) {
    int32_t row = 0, n = 0;
    for (int32_t k = 0; k < sb->n_items; k++) {
        eng_item *it = &sb->items[k];
        it->hid_row = -1;
        if (eng_mtp_is(it->r)) {
            it->hid_row = n;
            for (int32_t j = 0; j < it->n_tokens; j++) sb->hid_rows[n++] = row + j;
        }
        row += it->n_tokens;
    }
    sb->batch.n_hidden = n;
    sb->batch.hidden_rows = sb->hid_rows;
    sb->batch.hidden = sb->hidden;
    (void)e;
}

bool eng_mtp_forward(cinfer_engine *e, int32_t n, int32_t n_seqs, int32_t n_out) {
    eng_mtp *d = e->mtp;
    fwd_batch b = {.n_tokens = n,
                   .tokens = d->tokens,
                   .pos = d->pos,
                   .seq = d->seq,
                   .seqs = d->seqs,
                   .n_seqs = n_seqs,
                   .n_out = n_out,
                   .out_rows = d->rows,
                   .n_hidden = n_out,
                   .hidden_rows = d->rows,
                   .hidden = d->h_out};
    cf_err err;
    if (model_mtp_forward(e->fc, 0, &b, d->h_in, d->logits, &err) == 0) return true;
    if (!d->logged) LOG_WARN("engine: MTP pass failed (no drafts): %s", err.msg);
    d->logged = true;
    return false;
}

/* The conditioning state of position q for catch-up rows of item it: its exported row, the stash, or zeros. */
static const float *eng_mtp_state(const cinfer_engine *e, const eng_stepbuf *sb, const eng_item *it, eng_req *r,
                                  int32_t q, int32_t from) {
    if (q < 0) return NULL; /* position 0 has no previous state */
    if (q >= it->start && q < it->start + it->n_tokens)
        return sb->hidden + (int64_t)(it->hid_row + q - it->start) * e->mtp->hw;
    if (q == from - 1 && r->mtp_h_ok) return r->mtp_h;
    return NULL;
}

/* A failed catch-up pass: the step's MTP requests start over (their KV past what is certain is unknown). */
static void eng_mtp_reset(eng_stepbuf *sb) {
    for (int32_t k = 0; k < sb->n_items; k++)
        if (eng_mtp_is(sb->items[k].r)) {
            sb->items[k].r->d_computed = 0;
            sb->items[k].r->mtp_h_ok = false;
        }
}

void eng_mtp_catchup(cinfer_engine *e, eng_stepbuf *sb) {
    eng_mtp *d = e->mtp;
    int32_t n = 0, n_seqs = 0;
    size_t hb = (size_t)d->hw * sizeof(float);
    for (int32_t k = 0; k < sb->n_items; k++) {
        eng_item *it = &sb->items[k];
        eng_req *r = it->r;
        if (!eng_mtp_is(r) || it->hid_row < 0 || r->epoch != it->epoch || r->done) continue;
        int32_t to = r->n_computed, from = r->d_computed;
        if (from >= to) continue;
        if (!eng_draft_room(e, r, to)) { /* no blocks now: later, with h = 0 for what it missed */
            r->mtp_h_ok = false;
            continue;
        }
        for (int32_t p = from; p < to;) {
            if (n == d->cap || n_seqs == e->opt.max_seqs) { /* a full pass */
                if (!eng_mtp_forward(e, n, n_seqs, 0)) {
                    eng_mtp_reset(sb);
                    return;
                }
                n = n_seqs = 0;
            }
            int32_t take = to - p < d->cap - n ? to - p : d->cap - n;
            d->seqs[n_seqs] = (fwd_seq){.blocks = r->dbptr, .n_blocks = r->n_dblocks};
            for (int32_t j = 0; j < take; j++, n++) {
                const float *h = eng_mtp_state(e, sb, it, r, p + j - 1, from);
                d->tokens[n] = r->seq[p + j];
                d->pos[n] = p + j;
                d->seq[n] = n_seqs;
                if (h) memcpy(d->h_in + (int64_t)n * d->hw, h, hb);
                else memset(d->h_in + (int64_t)n * d->hw, 0, hb);
            }
            n_seqs++;
            p += take;
        }
        const float *last = eng_mtp_state(e, sb, it, r, to - 1, from);
        r->mtp_h_ok = last != NULL;
        if (last && last != r->mtp_h) memcpy(r->mtp_h, last, hb);
        r->d_computed = to;
    }
    if (n > 0 && !eng_mtp_forward(e, n, n_seqs, 0)) eng_mtp_reset(sb);
}

/* Draws draft k of item it from logits row `row`; its confidence is the MTP head's top softmax probability
 * there, known before the draw (so it never depends on the drafted token itself). */
static void eng_mtp_take(cinfer_engine *e, eng_item *it, float *row, int32_t k) {
    eng_req *r = it->r;
    int32_t len = r->prompt_len + r->n_generated;
    float mx = row[0];
    for (int32_t v = 1; v < e->n_vocab; v++)
        if (row[v] > mx) mx = row[v];
    double sum = 0;
    for (int32_t v = 0; v < e->n_vocab; v++) sum += exp((double)(row[v] - mx));
    r->spec_conf[k] = (float)(1.0 / sum);
    r->seq[len + k] = sampler_draft(r->dsmp, row, r->spec_q + (int64_t)k * e->n_vocab);
}

/* Confidence scheduling (spec_sched.h): keeps the prefix of each item's drafts that pays for its share of the
 * step's fitted cost; with no usable cost fit every draft stays. MTP and DSpark items compete together. */
static void eng_mtp_schedule(cinfer_engine *e, eng_stepbuf *sb) {
    eng_mtp *d = e->mtp;
    double t0, t1;
    if (e->opt.spec_confidence < 0 || !spec_cost_line(&e->spec_fit, &t0, &t1)) return;
    int32_t n = 0;
    double base = 0, tau = 0;
    for (int32_t i = 0; i < sb->n_items; i++) {
        eng_item *it = &sb->items[i];
        tau += it->kind == SCHED_DECODE;
        if (eng_mtp_is(it->r) && it->kind == SCHED_DECODE && it->n_draft > 0 && n < e->opt.max_seqs) {
            base += 1;
            d->items[n] = it;
            d->n_draft[n++] = it->n_draft;
        } else {
            base += it->n_tokens;
        }
    }
    if (n == 0) return;
    for (int32_t s = 0; s < n; s++) /* the items' confidences, side by side */
        memcpy(d->conf + (int64_t)s * CINFER_SPEC_MAX_K, d->items[s]->r->spec_conf, sizeof d->items[s]->r->spec_conf);
    spec_sched_pick(d->conf, CINFER_SPEC_MAX_K, d->n_draft, n, base, tau, t0, t1, d->cand, d->keep);
    for (int32_t s = 0; s < n; s++) {
        e->st.spec_conf_dropped += (uint64_t)(d->items[s]->n_draft - d->keep[s]);
        d->items[s]->n_draft = d->keep[s];
    }
}

/* Step 1: t_{len-1} at len - 1 with the target's state; returns the items drafting (in d->items): the chained
 * MTP ones (DSpark items are eng_dspark_propose's). */
static int32_t eng_mtp_first(cinfer_engine *e, eng_stepbuf *sb) {
    eng_mtp *d = e->mtp;
    size_t hb = (size_t)d->hw * sizeof(float);
    int32_t n = 0;
    for (int32_t i = 0; i < sb->n_items; i++) {
        eng_item *it = &sb->items[i];
        eng_req *r = it->r;
        if (r->drafter.kind != CINFER_SPEC_MTP || it->kind != SCHED_DECODE || it->n_draft <= 0) continue;
        int32_t len = r->prompt_len + r->n_generated, cap = it->n_draft;
        it->n_draft = 0; /* until drafted */
        it->n_tokens = 1;
        if (r->d_computed != len - 1 || n >= e->opt.max_seqs || n >= d->cap) continue; /* not caught up */
        while (cap > 0 && !eng_draft_room(e, r, len - 1 + cap)) cap--;
        if (cap == 0) continue;
        d->tokens[n] = r->seq[len - 1];
        d->pos[n] = len - 1;
        d->seq[n] = n;
        d->rows[n] = n;
        d->seqs[n] = (fwd_seq){.blocks = r->dbptr, .n_blocks = r->n_dblocks};
        if (r->mtp_h_ok) memcpy(d->h_in + (int64_t)n * d->hw, r->mtp_h, hb);
        else memset(d->h_in + (int64_t)n * d->hw, 0, hb);
        d->items[n++] = it;
        it->n_tokens = 1 + cap; /* the cap, until the steps end */
    }
    if (n == 0 || !eng_mtp_forward(e, n, n, n)) return 0;
    for (int32_t s = 0; s < n; s++) {
        eng_mtp_take(e, d->items[s], d->logits + (int64_t)s * e->n_vocab, 0);
        d->items[s]->n_draft = 1;
    }
    return n;
}

void eng_mtp_propose(cinfer_engine *e, eng_stepbuf *sb) {
    eng_mtp *d = e->mtp;
    size_t hb = (size_t)d->hw * sizeof(float);
    int32_t live = eng_mtp_first(e, sb);
    while (live > 0) { /* step j: the newest draft with the block's own state from step j - 1 */
        int32_t m = 0;
        for (int32_t s = 0; s < live; s++) {
            eng_item *it = d->items[s];
            if (it->n_draft >= it->n_tokens - 1) continue; /* reached its cap */
            eng_req *r = it->r;
            int32_t len = r->prompt_len + r->n_generated;
            d->tokens[m] = r->seq[len + it->n_draft - 1];
            d->pos[m] = len - 1 + it->n_draft;
            d->seq[m] = m;
            d->rows[m] = m;
            d->seqs[m] = (fwd_seq){.blocks = r->dbptr, .n_blocks = r->n_dblocks};
            memcpy(d->h_in + (int64_t)m * d->hw, d->h_out + (int64_t)s * d->hw, hb); /* s >= m: not yet overwritten */
            d->items[m++] = it;
        }
        if (m == 0 || !eng_mtp_forward(e, m, m, m)) break;
        for (int32_t s = 0; s < m; s++) {
            eng_mtp_take(e, d->items[s], d->logits + (int64_t)s * e->n_vocab, d->items[s]->n_draft);
            d->items[s]->n_draft++;
        }
        live = m;
    }
    if (d->dspark) eng_dspark_propose(e, sb);
    eng_mtp_schedule(e, sb);
    for (int32_t i = 0; i < sb->n_items; i++) { /* every drafting item: n_tokens from its drafts */
        eng_item *it = &sb->items[i];
        if (!eng_mtp_is(it->r) || it->kind != SCHED_DECODE) continue;
        it->n_tokens = 1 + it->n_draft;
        it->r->spec_has_q = it->n_draft > 0;
    }
}
