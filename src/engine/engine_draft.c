/* engine_draft.c - the draft-model drafter (CINFER_SPEC_DRAFT): a smaller
 * model with the target's vocabulary proposes the drafts, batched over every
 * verify item of a step, on the engine thread at assembly (the executor is
 * idle then: the previous step was committed, the next not yet dispatched).
 *
 * State per request: the draft model's KV in blocks of the engine's pool
 * (dblocks; the pool's blocks are sized for the target, so a draft block
 * must not be larger - checked at create), d_computed = positions with draft
 * KV, all of them committed tokens. Invariant: d_computed <= committed
 * length; after a verify that accepted a drafts, draft KV past the new
 * committed length - 1 is stale (eng_draft_rollback); preemption and finish
 * free the draft blocks with the target's (eng_release_blocks).
 *
 * Prefill items of such requests: the draft model prefills the same positions
 * in the first pass (no logits), so the first decode finds its KV caught up.
 * One propose (committed length len, k wanted):
 *   pass 0: feed seq[d_computed .. len) (catch-up: the tokens the last verify
 *           committed, or the whole prompt the first time, within the step's
 *           max_batch_tokens; a request whose catch-up does not fit gets a
 *           chunk and no drafts this step), logits at len - 1 -> draft 1;
 *   pass j: feed draft j at position len + j - 1 -> draft j + 1,
 * each pass one model_forward over all requests still drafting. Drafts are
 * drawn with the request's sampling parameters (no penalties) by
 * sampler_draft, which also gives q for lossless verification. Blocks are
 * taken from what the pool has; without them the request drafts fewer. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"

typedef struct eng_draft {
    const model *m;
    fwd_ctx *fc;
    int32_t cap_tokens; /* rows per pass */
    int32_t *tokens, *pos, *seq, *rows;
    fwd_seq *seqs;
    eng_item **items; /* per batch sequence */
    float *logits; /* max_seqs x n_vocab */
} eng_draft;

static int eng_draft_same_vocab(cinfer_engine *e, const model *dm, cf_err *err) {
    tokenizer *dt = NULL;
    if (tokenizer_load_gguf(model_get_gguf(dm), &dt, err)) return cf_prefix(err, "engine: the draft model's tokenizer");
    int rc = 0;
    if (tokenizer_n_vocab(dt) != e->n_vocab || model_get_hparams(dm)->n_vocab != e->n_vocab)
        rc = cf_fail(err, "engine: the draft model has %d tokens, the target %d: vocabularies differ",
                     tokenizer_n_vocab(dt), e->n_vocab);
    char a[256], b[256];
    for (int32_t id = 0; id < e->n_vocab && rc == 0; id++) {
        size_t na = tokenizer_token_bytes(e->tok, id, true, a, sizeof a);
        size_t nb = tokenizer_token_bytes(dt, id, true, b, sizeof b);
        if (na != nb || memcmp(a, b, na < sizeof a ? na : sizeof a))
            rc = cf_fail(err, "engine: token %d differs between the draft model and the target: vocabularies differ",
                         id);
    }
    tokenizer_free(dt);
    return rc;
}

int eng_draft_open(cinfer_engine *e, const model *dm, cf_err *err) {
    if (eng_draft_same_vocab(e, dm, err)) return -1;
    int64_t need = model_kv_block_floats_as(dm, e->kv_dt, e->opt.block_tokens), have = kv_pool_block_floats(e->kv);
    if (need > have)
        return cf_fail(err, "engine: the draft model's KV block (%lld floats) is larger than the target's (%lld)",
                       (long long)need, (long long)have);
    eng_draft *d = calloc(1, sizeof *d);
    if (!d) return cf_fail(err, "out of memory");
    e->draft = d;
    d->m = dm;
    d->cap_tokens = e->opt.max_batch_tokens;
    size_t bt = (size_t)d->cap_tokens, ns = (size_t)e->opt.max_seqs;
    d->tokens = malloc(bt * sizeof(int32_t));
    d->pos = malloc(bt * sizeof(int32_t));
    d->seq = malloc(bt * sizeof(int32_t));
    d->rows = malloc(ns * sizeof(int32_t));
    d->seqs = malloc(ns * sizeof(fwd_seq));
    d->items = malloc(ns * sizeof(eng_item *));
    d->logits = malloc(ns * (size_t)e->n_vocab * sizeof(float));
    if (!d->tokens || !d->pos || !d->seq || !d->rows || !d->seqs || !d->items || !d->logits)
        return cf_fail(err, "out of memory for the draft model's scratch");
    d->fc = fwd_ctx_create_kv(dm, e->tp, d->cap_tokens, e->opt.max_ctx, e->opt.block_tokens, e->kv_dt, err);
    if (!d->fc) return cf_prefix(err, "engine: the draft model");
    fwd_ctx_set_attn_prec(d->fc, eng_attn_prec(e));
    return 0;
}

void eng_draft_close(cinfer_engine *e) {
    eng_draft *d = e->draft;
    if (!d) return;
    if (d->fc) fwd_ctx_free(d->fc);
    free(d->tokens);
    free(d->pos);
    free(d->seq);
    free(d->rows);
    free(d->seqs);
    free(d->items);
    free(d->logits);
    free(d);
    e->draft = NULL;
}

int eng_draft_req_init(cinfer_engine *e, eng_req *q, cf_err *err) {
    q->dblocks = malloc((size_t)q->max_blocks * sizeof(int32_t));
    q->dbptr = malloc((size_t)q->max_blocks * sizeof(float *));
    sampler_params p = sampler_get_params(q->smp);
    p.repetition_penalty = 1.0f;
    p.presence_penalty = p.frequency_penalty = 0.0f;
    p.seed ^= 0xd1a4f7c3b5e29a61ull; /* its own stream: drafts never shift the target's draws */
    q->dsmp = sampler_create(&p, e->n_vocab);
    if (!q->dblocks || !q->dbptr || !q->dsmp) return cf_fail(err, "out of memory for the draft drafter");
    return 0;
}

void eng_draft_release(cinfer_engine *e, eng_req *r) {
    for (int32_t i = r->n_dblocks - 1; i >= 0; i--) kv_pool_unref(e->kv, r->dblocks[i]);
    r->n_dblocks = 0;
    r->d_computed = 0;
}

void eng_draft_rollback(eng_req *r) {
    int32_t committed = r->prompt_len + r->n_generated - 1; /* the last token is fed by the next catch-up */
    if (r->d_computed > committed) r->d_computed = committed;
}

/* Draft blocks for positions < n_pos, from what the pool has. */
bool eng_draft_room(cinfer_engine *e, eng_req *r, int32_t n_pos) {
    int32_t bt = e->opt.block_tokens, need = (n_pos + bt - 1) / bt - r->n_dblocks;
    if (need <= 0) return true;
    if (r->n_dblocks + need > r->max_blocks || need > kv_pool_available(e->kv)) return false;
    cf_err err;
    if (kv_pool_alloc_n(e->kv, need, r->dblocks + r->n_dblocks, &err)) return false;
    for (int32_t i = r->n_dblocks; i < r->n_dblocks + need; i++) r->dbptr[i] = kv_pool_block(e->kv, r->dblocks[i]);
    r->n_dblocks += need;
    return true;
}

/* Adds n rows of r (tokens seq[from..from+n)) as batch sequence s; returns the next free row. */
static int32_t eng_draft_rows(eng_draft *d, eng_req *r, int32_t s, int32_t from, int32_t n, int32_t row) {
    for (int32_t j = 0; j < n; j++, row++) {
        d->tokens[row] = r->seq[from + j];
        d->pos[row] = from + j;
        d->seq[row] = s;
    }
    d->seqs[s] = (fwd_seq){.blocks = r->dbptr, .n_blocks = r->n_dblocks};
    return row;
}

/* One batched pass; on failure every item drafts nothing more (logged once per call). */
static bool eng_draft_forward(eng_draft *d, int32_t rows, int32_t n_seqs, int32_t n_out) {
    fwd_batch b = {.n_tokens = rows,
                   .tokens = d->tokens,
                   .pos = d->pos,
                   .seq = d->seq,
                   .seqs = d->seqs,
                   .n_seqs = n_seqs,
                   .n_out = n_out,
                   .out_rows = d->rows};
    cf_err err;
    return model_forward(d->fc, &b, d->logits, &err) == 0;
}

/* Draws the next draft of item it from logits row j (draft index k = drafts so far). */
static void eng_draft_take(cinfer_engine *e, eng_item *it, float *row, int32_t k) {
    eng_req *r = it->r;
    int32_t len = r->prompt_len + r->n_generated;
    r->seq[len + k] = sampler_draft(r->dsmp, row, r->spec_q + (int64_t)k * e->n_vocab);
}

void eng_draft_propose(cinfer_engine *e, eng_stepbuf *sb) {
    eng_draft *d = e->draft;
    int32_t n = 0, rows = 0;
    /* prefill items: the draft model prefills the same positions in this step's first pass, so its
     * KV is caught up by the first decode (no output rows) */
    for (int32_t i = 0; i < sb->n_items; i++) {
        eng_item *it = &sb->items[i];
        eng_req *r = it->r;
        if (r->drafter.kind != CINFER_SPEC_DRAFT || it->kind != SCHED_PREFILL || n >= e->opt.max_seqs) continue;
        int32_t end = it->start + it->n_tokens, len = r->prompt_len + r->n_generated;
        if (end > len - 1) end = len - 1; /* the last token is fed by the first decode's catch-up */
        if (r->d_computed > it->start) r->d_computed = it->start; /* recomputation after preemption */
        int32_t cnt = end - r->d_computed;
        if (cnt > d->cap_tokens - rows) cnt = d->cap_tokens - rows;
        if (cnt <= 0 || !eng_draft_room(e, r, r->d_computed + cnt)) continue;
        rows = eng_draft_rows(d, r, n, r->d_computed, cnt, rows);
        d->items[n++] = NULL;
        r->d_computed += cnt;
    }
    /* pass 0: catch-up + the first draft */
    for (int32_t i = 0; i < sb->n_items; i++) {
        eng_item *it = &sb->items[i];
        eng_req *r = it->r;
        if (r->drafter.kind != CINFER_SPEC_DRAFT || it->kind != SCHED_DECODE || it->n_draft <= 0) continue;
        int32_t len = r->prompt_len + r->n_generated, cap = it->n_draft;
        if (r->d_computed > len - 1) r->d_computed = len - 1;
        it->n_draft = 0; /* until drafted */
        it->n_tokens = 1;
        int32_t left = d->cap_tokens - rows, catchup = len - r->d_computed;
        if (left <= 0 || n >= e->opt.max_seqs) continue;
        if (catchup > left) { /* only a chunk of the catch-up fits: no drafts this step */
            if (!eng_draft_room(e, r, r->d_computed + left)) continue;
            rows = eng_draft_rows(d, r, n, r->d_computed, left, rows);
            d->items[n++] = NULL;
            r->d_computed += left;
            continue;
        }
        while (cap > 0 && !eng_draft_room(e, r, len + cap - 1)) cap--;
        if (cap == 0) continue;
        rows = eng_draft_rows(d, r, n, r->d_computed, catchup, rows);
        d->rows[n] = rows - 1;
        d->items[n++] = it;
        r->d_computed = len;
        it->n_tokens = 1 + cap; /* the cap, until the passes end */
    }
    /* compact the output rows: only sequences that draft have one */
    int32_t n_out = 0;
    for (int32_t s = 0; s < n; s++)
        if (d->items[s]) d->rows[n_out++] = d->rows[s];
    if (n == 0) return;
    if (!eng_draft_forward(d, rows, n, n_out)) { /* no drafts this step; what pass 0 wrote is not KV */
        for (int32_t i = 0; i < sb->n_items; i++)
            if (sb->items[i].r->drafter.kind == CINFER_SPEC_DRAFT) {
                sb->items[i].r->d_computed = 0;
                if (sb->items[i].kind == SCHED_DECODE) sb->items[i].n_tokens = 1 + (sb->items[i].n_draft = 0);
            }
        return;
    }
    int32_t o = 0, live = 0;
    for (int32_t s = 0; s < n; s++) {
        eng_item *it = d->items[s];
        if (!it) continue;
        eng_draft_take(e, it, d->logits + (int64_t)o++ * e->n_vocab, 0);
        it->n_draft = 1;
        d->items[live++] = it;
    }
    /* passes 1..: feed the newest draft of every item that wants more */
    for (;;) {
        int32_t m = 0;
        for (int32_t s = 0; s < live; s++) {
            eng_item *it = d->items[s];
            if (it->n_draft >= it->n_tokens - 1) continue; /* reached its cap */
            eng_req *r = it->r;
            int32_t len = r->prompt_len + r->n_generated;
            eng_draft_rows(d, r, m, len + it->n_draft - 1, 1, m);
            d->rows[m] = m;
            d->items[m++] = it;
        }
        if (m == 0) break;
        for (int32_t s = m; s < live; s++) d->items[s] = NULL;
        if (!eng_draft_forward(d, m, m, m)) break;
        for (int32_t s = 0; s < m; s++) {
            eng_item *it = d->items[s];
            eng_req *r = it->r;
            r->d_computed = r->prompt_len + r->n_generated + it->n_draft;
            eng_draft_take(e, it, d->logits + (int64_t)s * e->n_vocab, it->n_draft);
            it->n_draft++;
        }
        live = m;
    }
    /* every drafting item: n_tokens from its drafts (items outside the passes already have 1) */
    for (int32_t i = 0; i < sb->n_items; i++) {
        eng_item *it = &sb->items[i];
        if (it->r->drafter.kind != CINFER_SPEC_DRAFT || it->kind != SCHED_DECODE) continue;
        it->n_tokens = 1 + it->n_draft;
        it->r->spec_has_q = it->n_draft > 0;
    }
}
