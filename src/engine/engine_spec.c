/* engine_spec.c - speculative decoding in the engine (docs/engine.md
 * "Speculative decoding"): which requests draft and how much, drafting at
 * assembly, verification at commit and the KV rollback. Engine thread only.
 *
 * Lifecycle of one verify item (request r, committed length len = prompt +
 * generated, n_computed = len - 1, seq[len - 1] = the last sampled token):
 *   plan      eng_spec_plan asks the scheduler for 1 + d tokens (d from the
 *             request's acceptance history and its share of the step's
 *             draft budget; 0 when more than spec_max_batch requests decode:
 *             the batch is compute-bound and drafts no longer ride free on
 *             the weight reads). The plan may be made against a projection
 *             (r in flight) that undercounts what the step in flight accepts.
 *   assemble  eng_spec_prepare rebases the item on the committed state:
 *             start = len - 1, k <= d drafts written to seq[len..len + k)
 *             (scratch past the committed tokens; the capacity reserves
 *             max_tokens positions and k <= max_tokens - generated - 1), KV
 *             blocks for positions < len + k (allocated from what the pool
 *             has, else fewer drafts; drafts never preempt anyone).
 *   forward   one ragged batch with every item; a verify item has logits at
 *             all of its 1 + k rows.
 *   commit    eng_spec_commit walks the rows: row j verifies draft j
 *             (eng_sample -> sampler_verify: greedy argmax, or lossless
 *             speculative sampling with p after the request's whole sampling
 *             pipeline and q one-hot or the drafter's), stopping at the first
 *             rejection (its replacement token is committed) or after the
 *             bonus token of row k; stop ids / EOS / max_tokens / reasoning
 *             budgets apply token by token exactly as in plain decoding.
 *             n_computed ends at the last accepted position: KV past it is
 *             stale and rolled back (eng_spec_rollback).
 * Invariant: r->seq[0..len) only ever holds committed tokens; drafts live
 * past len until accepted, so preemption, the prefix cache and the drafters
 * never see a rejected draft. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/engine_mtp.h"

#define ENG_SPEC_DEFAULT_K 8

/* Drafters the engine runs batched over a step (their own KV in draft blocks, q from sampler_draft). */
static bool eng_spec_batched(int32_t kind) {
    return kind == CINFER_SPEC_DRAFT || kind == CINFER_SPEC_MTP || kind == CINFER_SPEC_DSPARK;
}

int eng_spec_init(cinfer_engine *e, eng_req *q, const cinfer_request *r, cf_err *err) {
    int32_t kind = r->speculative.drafter, k = r->speculative.k;
    if (kind < 0 || kind >= CINFER_SPEC_N) return cf_fail(err, "unknown speculative drafter %d", kind);
    if (k < 0 || k > CINFER_SPEC_MAX_K)
        return cf_fail(err, "speculative k is %d (expected 1..%d, 0: default)", k, CINFER_SPEC_MAX_K);
    if (kind == CINFER_SPEC_DEFAULT) {
        kind = e->opt.speculative.drafter;
        if (k == 0) k = e->opt.speculative.k;
    }
    if (kind == CINFER_SPEC_DEFAULT || kind == CINFER_SPEC_OFF) return 0;
    if (r->grammar) return 0; /* constrained requests decode one token per step (docs/engine.md) */
    if (k == 0) k = e->opt.speculative.k > 0 ? e->opt.speculative.k : ENG_SPEC_DEFAULT_K;
    if (kind == CINFER_SPEC_DRAFT && !e->draft)
        return cf_fail(err, "the draft drafter needs a draft model (cinfer serve --draft-model)");
    if ((kind == CINFER_SPEC_MTP || kind == CINFER_SPEC_DSPARK) && eng_mtp_check(e, kind, err)) return -1;
    if (kind == CINFER_SPEC_DSPARK && k > e->mtp->ds.block_size) k = e->mtp->ds.block_size; /* one block a step */
    if (spec_drafter_create(kind, q->prompt_len + q->max_tokens, &q->drafter, err)) return -1;
    spec_policy_init(&q->spol, k, kind == CINFER_SPEC_NGRAM);
    if (eng_spec_batched(kind)) {
        q->spec_q = malloc((size_t)k * (size_t)e->n_vocab * sizeof(float));
        if (!q->spec_q) return cf_fail(err, "out of memory for draft probabilities");
        if (kind == CINFER_SPEC_DRAFT ? eng_draft_req_init(e, q, err) : eng_mtp_req_init(e, q, err)) return -1;
    }
    return 0;
}

void eng_spec_free(eng_req *q) {
    spec_drafter_free(&q->drafter);
    free(q->spec_q);
    q->spec_q = NULL;
    free(q->dblocks);
    free(q->dbptr);
    sampler_free(q->dsmp);
    free(q->mtp_h);
    q->mtp_h = NULL;
    q->dblocks = NULL;
    q->dbptr = NULL;
    q->dsmp = NULL;
}

static bool eng_spec_is_decode(const sched_req *s) {
    return s->state == SCHED_RUNNING && s->n_generated > 0 && s->prompt_len + s->n_generated - s->n_computed == 1 &&
           s->n_generated < s->max_tokens;
}

void eng_spec_plan(cinfer_engine *e, sched_req *s) {
    int32_t n_decode = 0, n_spec = 0;
    for (int32_t i = 0; i < e->n_active; i++) {
        s[i].n_draft = 0;
        if (!eng_spec_is_decode(&s[i])) continue;
        n_decode++;
        n_spec += eng_spec_on(e->active[i]);
    }
    if (n_spec == 0 || n_decode > e->opt.spec_max_batch) return;
    int32_t share = e->opt.spec_step_drafts / n_spec;
    for (int32_t i = 0; i < e->n_active; i++) {
        eng_req *r = e->active[i];
        if (!eng_spec_on(r) || r->done || !eng_spec_is_decode(&s[i])) continue;
        int32_t room = s[i].max_tokens - s[i].n_generated - 1; /* the bonus token counts too */
        int32_t cap = share < room ? share : room;
        s[i].n_draft = cap > 0 ? spec_policy_want(&r->spol, cap, n_decode == 1) : 0;
    }
}

/* Blocks for positions < n_pos, allocating what is missing if the pool has it. */
static bool eng_spec_room(cinfer_engine *e, eng_req *r, int32_t n_pos) {
    int32_t bt = e->opt.block_tokens, need = (n_pos + bt - 1) / bt - r->n_blocks;
    if (need <= 0) return true;
    if (r->n_blocks + need > r->max_blocks || need > kv_pool_available(e->kv)) return false;
    cf_err err;
    if (kv_pool_alloc_n(e->kv, need, r->blocks + r->n_blocks, &err)) return false;
    for (int32_t i = r->n_blocks; i < r->n_blocks + need; i++) r->bptr[i] = kv_pool_block(e->kv, r->blocks[i]);
    r->n_blocks += need;
    return true;
}

bool eng_spec_prepare(cinfer_engine *e, eng_item *it) {
    eng_req *r = it->r;
    if (r->epoch != it->epoch || r->done || r->state != SCHED_RUNNING) return false;
    int32_t len = r->prompt_len + r->n_generated;
    if (r->n_computed != len - 1 || r->n_generated >= r->max_tokens) return false;
    if (!eng_spec_room(e, r, len)) return false; /* not even the decode's own token: planned next step */
    int32_t k = it->n_tokens - 1, room = r->max_tokens - r->n_generated - 1;
    if (k > room) k = room;
    if (k > r->spol.k_max) k = r->spol.k_max;
    while (k > 0 && !eng_spec_room(e, r, len + k)) k--; /* drafts take only what the pool has */
    it->start = len - 1;
    it->n_draft = 0;
    if (k > 0 && eng_spec_batched(r->drafter.kind)) {
        it->n_draft = k; /* the most it may take: eng_draft_propose / eng_mtp_propose draft them, batched */
    } else if (k > 0) {
        bool has_q = false;
        k = r->drafter.ops->propose(r->drafter.state, r->seq, len, k, r->seq + len, r->spec_q, &has_q);
        r->spec_has_q = has_q && r->spec_q;
        it->n_draft = k > 0 ? k : 0;
    }
    it->n_tokens = 1 + it->n_draft;
    it->sample = true;
    return true;
}

/* KV rollback after a verify: positions >= r->n_computed hold KV of rejected
 * drafts. Paged blocks: those slots are stale and are simply overwritten by
 * the next forward (attention reads positions < the query's only), and the
 * tail blocks are kept for the next verify up to what k_max drafts need;
 * blocks beyond that are released. Architectures whose per-sequence state is
 * not positional - sliding-window rings that overwrite old positions, KV
 * compressor state (window / compressed attention) - must restore it to
 * n_computed here: this is the one place a verify's side effects are undone.
 * Drafters with their own KV or hidden state get the same call. */
static void eng_spec_rollback(cinfer_engine *e, eng_req *r) {
    int32_t bt = e->opt.block_tokens, keep = (r->n_computed + 1 + r->spol.k_max + bt - 1) / bt;
    while (r->n_blocks > keep && r->n_blocks > r->n_registered) kv_pool_unref(e->kv, r->blocks[--r->n_blocks]);
    if (r->drafter.ops && r->drafter.ops->rollback)
        r->drafter.ops->rollback(r->drafter.state, r->prompt_len + r->n_generated);
    if (eng_spec_batched(r->drafter.kind)) eng_draft_rollback(r);
}

void eng_spec_commit(cinfer_engine *e, const eng_item *it, float *rows) {
    eng_req *r = it->r;
    int32_t k = it->n_draft, accepted = 0;
    r->n_computed = it->start + 1;
    for (int32_t j = 0; j <= k; j++) {
        int32_t draft = j < k ? r->seq[it->start + 1 + j] : -1; /* read before the commit overwrites it */
        const float *q = j < k && r->spec_has_q ? r->spec_q + (int64_t)j * e->n_vocab : NULL;
        bool ok = eng_sample(e, r, rows + (int64_t)j * e->n_vocab, draft, q);
        if (r->done || !ok) {
            accepted += ok;
            break;
        }
        accepted++;
        r->n_computed++; /* the accepted draft's KV (computed at its position) stands */
    }
    int32_t kind = r->drafter.kind;
    e->st.spec_verifies[kind]++;
    e->st.spec_drafted[kind] += (uint64_t)k;
    e->st.spec_accepted[kind] += (uint64_t)accepted;
    e->st.spec_accept_len[accepted]++;
    spec_policy_update(&r->spol, k, accepted);
    if (!r->done) eng_spec_rollback(e, r);
}
