/* engine_step.c - the phases of one engine step, run by the engine thread
 * with no lock held. With asynchronous scheduling, the step being planned
 * (N+1) and the step being computed (N) overlap; see engine_internal.h.
 *
 * eng_plan (while step N computes):
 *   1. describe every active request to the scheduler (requests in step N at
 *      their projected state; prefix-cache peeks are cached per request and
 *      redone only when the cache's contents changed);
 *   2. sched_plan_step;
 *   3. preemptions: free the victim's blocks (tail first, so the LRU evicts a
 *      sequence's tail before its head), back to PREEMPTED, recompute later
 *      (a victim in step N gets its result there dropped: epoch changed);
 *   4. admissions: prefix_cache_match up to the planned start (taking refs,
 *      all before any allocation so no allocation evicts a planned hit); a
 *      shorter match starts the chunk earlier with the same length;
 *   5. allocate the blocks each item needs (the plan guarantees they exist).
 *   Only metadata changes here: step N's forward reads its own batch copy and
 *   the block-table prefix it was given, which planning never rewrites.
 * eng_commit (after step N's forward): per still-valid item, advance
 *   n_computed, register newly full blocks in the prefix cache (prompt and
 *   generated alike; a duplicate key swaps in the existing block), sample
 *   with the request's sampler (or force a reasoning budget's end marker,
 *   engine_think.c; under a grammar's mask, or take the one token it allows,
 *   then advance the matcher, engine_grammar.c), decide EOS / stop ids / length.
 * eng_assemble: drop planned items whose request finished or changed epoch,
 *   then fill ONE fwd_batch (rows of item k are consecutive, seq k; an
 *   out_row only for items whose chunk reaches the end of the sequence),
 *   reading decode tokens sampled by the commit.
 * Invariants kept: the sum of block refs held by requests equals the entries
 * of their block tables; r->blocks[0..n_registered) are cached under the
 * chain whose last key is r->last_key. Scratch is preallocated (engine.c):
 * nothing here allocates except the pool's blocks. */
#include <math.h>
#include <string.h>

#include "base/log.h"
#include "engine/engine_internal.h"

static prefix_salt eng_salt(const eng_req *r) { return (prefix_salt){.bytes = r->salt, .len = r->salt_len}; }

static uint64_t eng_cache_version(const cinfer_engine *e) {
    prefix_cache_stats s = prefix_cache_get_stats(e->pc);
    return 1 + s.inserts + s.evictions + (e->swa ? swa_state_version(e->swa) : 0);
}

void eng_release_blocks(cinfer_engine *e, eng_req *r) {
    r->epoch++;
    eng_store_detach(e, r);
    if (r->n_dblocks) eng_draft_release(e, r);
    for (int32_t i = r->n_blocks - 1; i >= 0; i--) kv_pool_unref(e->kv, r->blocks[i]);
    if (r->ring >= 0) kv_pool_ring_release(e->kv, r->ring);
    r->ring = -1;
    eng_swa_unpin(e, r);
    r->swa_snap_block = -1;
    r->replay_from = r->keep_below = 0;
    r->approx = false;
    r->swa_plan_approx = false;
    r->n_blocks = 0;
    r->n_computed = 0;
    r->n_registered = 0;
    memset(r->last_key, 0, sizeof r->last_key);
    r->peek_version = 0;
}

/* Window models: the cached blocks lack the window rows. Resume at the last
 * boundary with a window-state snapshot (exact), unless bounded replay is on
 * and the hit reaches more than swa_replay_tokens past it: then replay the
 * hit from swa_replay_tokens before its end, rounded down to a block (the
 * scheduler counts cached tokens in blocks) (docs/engine.md "Bounded replay"). */
static void eng_describe_window(cinfer_engine *e, eng_req *r) {
    int32_t hit = r->n_cached_peek, snap = eng_swa_resume_point(e, r, hit, NULL, NULL), w = e->swa_replay_tokens;
    /* first admission only: a preempted request recomputes exactly (its tokens so far stand) */
    bool replay = w > 0 && !r->swa_exact && !r->admitted_once;
    int32_t exact = hit, approx_snap = 0;
    if (replay) { /* the blocks earlier replays computed past this exact hit (same salt), and their snapshots */
        hit += eng_swa_approx_peek(e, r, hit, r->prompt_len + r->n_generated - 1);
        approx_snap = eng_swa_approx_resume_point(e, r, exact, hit, NULL, NULL);
    }
    int32_t bt = e->opt.block_tokens, from = (hit - w) / bt * bt;
    r->swa_plan_end = 0;
    r->swa_plan_approx = false;
    r->n_cached_peek = snap;
    if (approx_snap > snap && approx_snap >= from) { /* a returning session already on the approximate lineage */
        r->swa_plan_approx = true;
        r->n_cached_peek = approx_snap;
    } else if (replay && hit - w > snap && from > snap) {
        r->swa_plan_end = hit;
        r->n_cached_peek = from;
    }
}

static void eng_describe(cinfer_engine *e, eng_req *r, sched_req *s, uint64_t version) {
    *s = (sched_req){
        .state = r->state,
        .priority = r->priority,
        .arrival = r->id,
        .prompt_len = r->prompt_len,
        .n_generated = r->in_flight ? r->proj_generated : r->n_generated,
        .max_tokens = r->max_tokens,
    };
    if (r->done) { /* finished, waiting to leave the active array: never scheduled */
        s->state = SCHED_WAITING;
        s->n_generated = s->max_tokens;
        return;
    }
    if (r->state == SCHED_RUNNING) {
        s->n_computed = r->in_flight ? r->proj_computed : r->n_computed;
        s->n_blocks = r->n_blocks;
        for (int32_t i = 0; i < r->n_blocks; i++) s->n_reclaimable += kv_pool_refs(e->kv, r->blocks[i]) == 1;
    } else {
        if (r->peek_version != version) {
            r->n_cached_peek = prefix_cache_peek(e->pc, r->seq, r->prompt_len + r->n_generated, eng_salt(r));
            /* window models: cached blocks lack the window rows; resume only where a snapshot has them */
            r->n_prefix_peek = r->n_cached_peek;
            if (e->window_rings) eng_describe_window(e, r);
            r->peek_version = version;
        }
        s->n_cached = r->n_cached_peek;
    }
}

static void eng_set_ptrs(cinfer_engine *e, eng_req *r, int32_t from) {
    for (int32_t i = from; i < r->n_blocks; i++) r->bptr[i] = kv_pool_block(e->kv, r->blocks[i]);
}

/* Window models: keep the matched blocks only up to the last boundary with a
 * window-state snapshot (pinned for eng_assemble to restore); exact. */
static void eng_admit_window(cinfer_engine *e, eng_req *r, prefix_match *m) {
    int32_t bt = e->opt.block_tokens;
    int32_t b = eng_swa_resume_point(e, r, m->n_tokens, m->last_key, &r->swa_slot);
    for (int32_t i = m->n_blocks - 1; i >= b / bt; i--) kv_pool_unref(e->kv, r->blocks[i]);
    m->n_blocks = b / bt;
    m->n_tokens = b;
    if (b == 0) memset(m->last_key, 0, sizeof m->last_key);
    r->swa_restore_at = b;
    r->swa_snap_block = m->n_blocks > 0 ? m->n_blocks : -1;
    /* a hit: resumed from a snapshot; a miss: the prefix cache had blocks, the tier no state for them */
    if (b > 0) e->st.swa_state_hits++;
    else if (e->swa && r->n_prefix_peek >= bt) e->st.swa_state_misses++;
}

/* The blocks of [0, end) along the exact lineage (at most its first
 * exact_end tokens), then the approximate one; false (no reference kept)
 * unless they reach end. A resume from an approximate snapshot passes the
 * exact length its snapshot chains from, so exact blocks cached since the
 * plan never replace the approximate rows the snapshot was taken over. */
static bool eng_match_lineage(cinfer_engine *e, eng_req *r, int32_t exact_end, int32_t end, prefix_match *m,
                              cf_err *err) {
    if (prefix_cache_match(e->pc, r->seq, exact_end < end ? exact_end : end, eng_salt(r), r->blocks, r->max_blocks, m,
                           err))
        return false;
    if (m->n_tokens < end) { /* the rest along the approximate lineage */
        prefix_match a;
        if (prefix_cache_match_from(e->pc, m->n_blocks > 0 ? m->last_key : NULL, r->seq + m->n_tokens,
                                    end - m->n_tokens, eng_swa_approx_salt(r), r->blocks + m->n_blocks,
                                    r->max_blocks - m->n_blocks, &a, err) == 0 &&
            a.n_blocks > 0) {
            m->n_blocks += a.n_blocks;
            m->n_tokens += a.n_tokens;
            memcpy(m->last_key, a.last_key, sizeof m->last_key);
        }
    }
    if (m->n_tokens != end) {
        for (int32_t i = m->n_blocks - 1; i >= 0; i--) kv_pool_unref(e->kv, r->blocks[i]);
        return false;
    }
    return true;
}

/* Bounded replay as planned by eng_describe_window: every block of the hit
 * [0, swa_plan_end) is kept; the item starts at the replay start. False (no
 * reference kept) when the plan no longer holds: the exact path runs. */
static bool eng_admit_replay(cinfer_engine *e, eng_req *r, sched_item *it, prefix_match *m, cf_err *err) {
    int32_t end = r->swa_plan_end;
    if (end <= 0 || it->start != r->n_cached_peek || it->start >= end) return false;
    if (!eng_match_lineage(e, r, end, end, m, err)) return false;
    r->replay_from = it->start;
    r->keep_below = end;
    r->approx = true; /* rows from here on depend on the replay: the approximate lineage only */
    e->st.swa_replays++;
    return true;
}

/* A resume from an approximate-lineage snapshot as planned by
 * eng_describe_window (a session whose earlier turn was replayed): the blocks
 * up to it are kept, the snapshot pinned for eng_assemble to restore, and the
 * request continues the approximate lineage. False (nothing kept) when the
 * plan no longer holds. */
static bool eng_admit_approx_snapshot(cinfer_engine *e, eng_req *r, sched_item *it, prefix_match *m, cf_err *err) {
    int32_t end = it->start, exact = r->n_prefix_peek < end ? r->n_prefix_peek : end;
    if (!r->swa_plan_approx || end != r->n_cached_peek || end <= 0) return false;
    uint8_t key[PREFIX_KEY_BYTES];
    int32_t slot = -1;
    exact = prefix_cache_peek(e->pc, r->seq, exact, eng_salt(r));
    if (eng_swa_approx_resume_point(e, r, exact, end, key, &slot) != end) {
        if (slot >= 0) swa_state_unpin(e->swa, slot);
        return false;
    }
    if (!eng_match_lineage(e, r, exact, end, m, err)) {
        swa_state_unpin(e->swa, slot);
        return false;
    }
    r->swa_slot = slot;
    r->swa_restore_at = end;
    r->swa_snap_block = m->n_blocks;
    r->approx = true;
    e->st.swa_state_hits++;
    return true;
}

/* Step 4 for one admitted item: reuse cached full blocks, fix the start. */
static int eng_admit(cinfer_engine *e, eng_req *r, sched_item *it, cf_err *err) {
    prefix_match m;
    int32_t replay_from = 0;
    if (e->window_rings) {
        r->ring = kv_pool_ring_acquire(e->kv);
        if (r->ring < 0) return cf_fail(err, "engine: no free window ring (internal: more running than max_seqs)");
    }
    if (e->window_rings && eng_admit_replay(e, r, it, &m, err)) {
        replay_from = r->replay_from;
    } else if (e->window_rings && eng_admit_approx_snapshot(e, r, it, &m, err)) {
        /* restored in eng_assemble like an exact snapshot */
    } else {
        if (prefix_cache_match(e->pc, r->seq, it->start, eng_salt(r), r->blocks, r->max_blocks, &m, err)) return -1;
        if (e->window_rings) eng_admit_window(e, r, &m);
    }
    r->n_blocks = m.n_blocks;
    r->n_registered = m.n_blocks;
    memcpy(r->last_key, m.last_key, sizeof r->last_key);
    eng_set_ptrs(e, r, 0);
    r->n_computed = replay_from ? replay_from : m.n_tokens;
    r->state = SCHED_RUNNING;
    it->start = r->n_computed;
    if (!r->admitted_once) {
        r->admitted_once = true;
        r->usage.cached_tokens = r->n_computed < r->prompt_len ? r->n_computed : r->prompt_len;
        if (replay_from) {
            int32_t end = m.n_tokens < r->prompt_len ? m.n_tokens : r->prompt_len;
            r->usage.replayed_tokens = end > replay_from ? end - replay_from : 0;
        }
        e->st.cached_tokens += (uint64_t)r->usage.cached_tokens;
        e->st.cached_tokens_memory += (uint64_t)r->usage.cached_tokens;
    }
    return 0;
}

/* Step 5: blocks for positions [start, start + n). */
static int eng_alloc(cinfer_engine *e, eng_req *r, const sched_item *it, cf_err *err) {
    int32_t bt = e->opt.block_tokens;
    int32_t need = (it->start + it->n_tokens + bt - 1) / bt - r->n_blocks;
    if (need <= 0) return 0;
    if (r->n_blocks + need > r->max_blocks) return cf_fail(err, "engine: block table overflow (internal)");
    if (kv_pool_alloc_n(e->kv, need, r->blocks + r->n_blocks, err)) return -1;
    r->n_blocks += need;
    eng_set_ptrs(e, r, r->n_blocks - need);
    return 0;
}

/* Step 8a: registers blocks that became full; a duplicate key swaps blocks. */
static void eng_register(cinfer_engine *e, eng_req *r) {
    /* after a bounded replay: approximate rows, keyed under the approximate lineage (docs/engine.md) */
    prefix_salt salt = r->approx ? eng_swa_approx_salt(r) : eng_salt(r);
    int32_t bt = e->opt.block_tokens, full = r->n_computed / bt;
    for (int32_t b = r->n_registered; b < full; b++) {
        cf_err err;
        const uint8_t *parent = b > 0 ? r->last_key : NULL;
        int32_t got =
            prefix_cache_insert(e->pc, parent, r->seq + (int64_t)b * bt, salt, r->blocks[b], r->last_key, &err);
        if (got < 0) {
            LOG_WARN("engine: request %llu: %s", (unsigned long long)r->id, err.msg);
            r->n_registered = INT32_MAX / 2; /* stop registering this sequence */
            return;
        }
        if (got != r->blocks[b]) {
            kv_pool_unref(e->kv, r->blocks[b]);
            r->blocks[b] = got;
            r->bptr[b] = kv_pool_block(e->kv, got);
        }
        r->n_registered = b + 1;
        eng_swa_snapshot(e, r); /* window models: the ring rows that end at this boundary */
    }
}

static float eng_logprob(const float *row, int32_t n, int32_t tok) {
    float mx = row[0];
    for (int32_t i = 1; i < n; i++) mx = row[i] > mx ? row[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)(row[i] - mx));
    return (float)((double)(row[tok] - mx) - log(sum));
}

/* Step 8b: sample one token from the item's logits row (or take the token a
 * reasoning budget forces: engine_think.c; its logprob and alternatives come
 * from the same raw row) and apply stops. */
/* min_tokens: EOS/EOG and the stop ids cannot be sampled yet (the raw row for logprobs is kept). */
static void eng_mask_stops(const cinfer_engine *e, const eng_req *r, float *row) {
    for (int32_t id = 0; id < e->n_vocab; id++)
        if (tokenizer_is_eog(e->tok, id)) row[id] = -INFINITY;
    for (int32_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] >= 0 && r->stop_ids[i] < e->n_vocab) row[r->stop_ids[i]] = -INFINITY;
}

bool eng_sample(cinfer_engine *e, eng_req *r, float *row, int32_t draft, const float *q) {
    if (r->want_logprobs) memcpy(e->lp_row, row, (size_t)e->n_vocab * sizeof(float));
    if (r->n_generated < r->min_tokens) eng_mask_stops(e, r, row);
    bool accepted = false;
    int32_t tok = eng_think_forced(r);
    if (tok >= 0) {
        e->st.think_forced_tokens++;
        accepted = tok == draft;
    } else if (r->gm) { /* constrained requests do not speculate (eng_spec_init): draft is -1 here */
        if ((tok = eng_grammar_pick(e, r, row)) < 0) tok = sampler_sample(r->smp, row);
    } else if (draft >= 0) tok = sampler_verify(r->smp, row, draft, q, &accepted);
    else tok = sampler_sample(r->smp, row);
    float lp = r->want_logprobs ? eng_logprob(e->lp_row, e->n_vocab, tok) : NAN;
    if (r->top_k)
        eng_top_logprobs(e->lp_row, e->n_vocab, r->top_k, r->pend_top_ids[r->pend_n], r->pend_top_lps[r->pend_n]);
    sampler_accept(r->smp, tok);
    if (r->gm && eng_grammar_accept(e, r, tok)) {
        const char *limit = cinfer_grammar_matcher_limit_error(r->gm);
        eng_finish(e, r, CINFER_FINISH_ERROR, true,
                   limit ? limit : "the grammar rejected the sampled token (internal error)");
        return false;
    }
    r->seq[r->prompt_len + r->n_generated] = tok;
    r->n_generated++;
    eng_think_accept(r);
    eng_on_token(e, r, tok, lp, accepted);
    return accepted;
}

/* The batch rows of one item; returns the next free row. */
static int32_t eng_fill_rows(cinfer_engine *e, eng_stepbuf *sb, const eng_item *it, int32_t k, int32_t row,
                             int32_t *n_out) {
    eng_req *r = it->r;
    for (int32_t j = 0; j < it->n_tokens; j++, row++) {
        int32_t p = it->start + j;
        sb->tokens[row] = r->seq[p];
        sb->pos[row] = p;
        sb->seq[row] = k;
        if (p < r->keep_below) e->st.swa_replayed_tokens++;
        else if (p < r->prompt_len) e->st.prompt_tokens_computed++;
        else if (it->kind != SCHED_DECODE) e->st.recomputed_tokens++;
    }
    if (it->kind == SCHED_DECODE) e->st.decode_tokens++;
    sb->seqs[k] = (fwd_seq){.blocks = r->bptr,
                            .n_blocks = r->n_blocks,
                            .ring = r->ring >= 0 ? kv_pool_ring(e->kv, r->ring) : NULL,
                            .ring_blocks = kv_pool_ring_blocks(e->kv),
                            .replay_from = r->replay_from,
                            .keep_below = r->keep_below};
    if (it->n_draft > 0) /* a verify item: logits at every row */
        for (int32_t j = it->n_tokens; j > 0; j--) sb->rows[(*n_out)++] = row - j;
    else if (it->sample) sb->rows[(*n_out)++] = row - 1;
    return row;
}

static void eng_fail_planned(cinfer_engine *e, const sched_plan *plan, const char *msg) {
    for (int32_t k = 0; k < plan->n_items; k++)
        eng_finish(e, e->active[plan->items[k].req], CINFER_FINISH_ERROR, false, msg);
}

void eng_note_kv(cinfer_engine *e) {
    kv_pool_stats ks = kv_pool_get_stats(e->kv);
    e->st.kv_blocks_free = ks.free;
    e->st.kv_blocks_used = ks.used;
    e->st.kv_blocks_cached = ks.cached;
    if (ks.used > e->st.kv_blocks_used_peak) e->st.kv_blocks_used_peak = ks.used;
    e->st.kv_bytes = ks.bytes;
    e->st.kv_rings_total = ks.rings;
    e->st.kv_rings_used = ks.rings_used;
    e->st.kv_ring_tokens = ks.ring_tokens;
    e->st.kv_ring_bytes = ks.ring_bytes;
    eng_swa_note(e);
}

eng_plan_result eng_plan(cinfer_engine *e, eng_stepbuf *sb) {
    sb->n_items = 0;
    int32_t n = e->n_active;
    if (n == 0) return ENG_PLAN_OK;
    uint64_t version = eng_cache_version(e);
    for (int32_t i = 0; i < n; i++) eng_describe(e, e->active[i], &e->s_reqs[i], version);
    eng_spec_plan(e, e->s_reqs);
    sched_input in = {
        .reqs = e->s_reqs,
        .n_reqs = n,
        .free_blocks = kv_pool_available(e->kv),
        .block_tokens = e->opt.block_tokens,
        .limits = e->limits,
    };
    sched_plan plan = {.items = e->s_items, .preempted = e->s_pre, .scratch = e->s_scratch};
    cf_err err = {0};
    if (sched_plan_step(&in, &plan, &err)) {
        LOG_ERROR("engine: %s", err.msg);
        return ENG_PLAN_ERROR;
    }
    for (int32_t i = 0; i < plan.n_preempted; i++) {
        eng_req *r = e->active[plan.preempted[i]];
        eng_release_blocks(e, r);
        r->state = SCHED_PREEMPTED;
        e->st.preemptions++;
    }
    if (plan.n_items == 0)
        return plan.n_preempted > 0 ? ENG_PLAN_OK : eng_store_n_loading(e) > 0 ? ENG_PLAN_WAIT_STORE : ENG_PLAN_IDLE;
    int32_t kept = 0;
    for (int32_t k = 0; k < plan.n_items; k++) {
        sched_item *it = &plan.items[k];
        if (it->admitted && eng_admit(e, e->active[it->req], it, &err)) {
            eng_fail_planned(e, &plan, err.msg);
            return ENG_PLAN_OK;
        }
        /* window models: not after a memory replay or on the approximate lineage (its blocks run to the hit's
         * end, past which the ring rows are approximate); otherwise eng_swa_after_load decides how loaded
         * blocks resume */
        if (it->admitted && !e->active[it->req]->replay_from && !e->active[it->req]->approx &&
            eng_store_on_admit(e, e->active[it->req]))
            continue; /* waits for the store */
        plan.items[kept++] = *it;
    }
    plan.n_items = kept;
    for (int32_t k = 0; k < plan.n_items; k++)
        if (eng_alloc(e, e->active[plan.items[k].req], &plan.items[k], &err)) {
            eng_fail_planned(e, &plan, err.msg);
            return ENG_PLAN_OK;
        }
    eng_note_kv(e);
    for (int32_t k = 0; k < plan.n_items; k++) {
        const sched_item *it = &plan.items[k];
        eng_req *r = e->active[it->req];
        sb->items[sb->n_items++] = (eng_item){
            .r = r,
            .epoch = r->epoch,
            .kind = it->kind,
            .start = it->start,
            .n_tokens = it->n_tokens,
            .sample = it->sample,
            .n_draft = 0,
        };
    }
    return ENG_PLAN_OK;
}

/* A planned item still stands: same epoch, not finished, and (a decode
 * planned against a projection) its input token exists. */
static bool eng_item_valid(const eng_item *it) {
    const eng_req *r = it->r;
    return r->epoch == it->epoch && !r->done && r->state == SCHED_RUNNING && r->n_computed == it->start &&
           it->start + it->n_tokens <= r->prompt_len + r->n_generated;
}

int32_t eng_assemble(cinfer_engine *e, eng_stepbuf *sb) {
    int32_t w = 0;
    for (int32_t k = 0; k < sb->n_items; k++) {
        eng_item *it = &sb->items[k];
        bool keep = it->kind == SCHED_DECODE && eng_spec_on(it->r) ? eng_spec_prepare(e, it) : eng_item_valid(it);
        if (keep) sb->items[w++] = *it;
    }
    sb->n_items = w;
    if (e->draft) eng_draft_propose(e, sb);
    if (e->mtp) eng_mtp_propose(e, sb);
    int32_t rows = 0, n_out = 0;
    for (int32_t k = 0; k < sb->n_items; k++) {
        eng_item *it = &sb->items[k];
        eng_swa_restore(e, it->r); /* a resume planned at admission: the previous pass is done with the ring */
        if (it->n_draft == 0) it->sample = it->start + it->n_tokens == it->r->prompt_len + it->r->n_generated;
        rows = eng_fill_rows(e, sb, it, k, rows, &n_out);
        it->r->in_flight = true;
        it->r->proj_computed = it->start + it->n_tokens - it->n_draft; /* a verify accepts at least nothing */
        it->r->proj_generated = it->r->n_generated + it->sample;
    }
    sb->batch = (fwd_batch){
        .n_tokens = rows,
        .tokens = sb->tokens,
        .pos = sb->pos,
        .seq = sb->seq,
        .seqs = sb->seqs,
        .n_seqs = sb->n_items,
        .n_out = n_out,
        .out_rows = sb->rows,
    };
    if (e->mtp) eng_mtp_mark(e, sb);
    return rows;
}

void eng_commit(cinfer_engine *e, eng_stepbuf *sb) {
    for (int32_t k = 0; k < sb->n_items; k++) sb->items[k].r->in_flight = false;
    if (sb->rc) {
        for (int32_t k = 0; k < sb->n_items; k++)
            if (sb->items[k].r->epoch == sb->items[k].epoch)
                eng_finish(e, sb->items[k].r, CINFER_FINISH_ERROR, false, sb->err.msg);
        return;
    }
    e->st.steps++;
    e->st.forward_tokens += (uint64_t)sb->batch.n_tokens;
    spec_cost_add(&e->spec_fit, (double)sb->batch.n_tokens, sb->t_forward);
    int32_t o = 0;
    for (int32_t k = 0; k < sb->n_items; k++) {
        const eng_item *it = &sb->items[k];
        eng_req *r = it->r;
        float *row = it->sample ? sb->logits + (int64_t)o * e->n_vocab : NULL;
        o += it->n_draft > 0 ? it->n_tokens : it->sample;
        if (r->epoch != it->epoch || r->done) continue; /* cancelled, preempted or finished meanwhile */
        if (it->n_draft > 0) eng_spec_commit(e, it, row); /* sets n_computed past the accepted drafts */
        else r->n_computed = it->start + it->n_tokens;
        if (r->done) continue; /* finished by the verify (its blocks are released) */
        int32_t reg_from = r->n_registered;
        uint8_t reg_parent[PREFIX_KEY_BYTES];
        memcpy(reg_parent, r->last_key, sizeof reg_parent);
        eng_register(e, r);
        if (!r->approx) { /* exact blocks only: approximate ones never leave this engine */
            eng_store_on_register(e, r, reg_from, reg_from > 0 ? reg_parent : NULL);
            if (r->kv_export) eng_handoff_export(e, r);
        }
        if (row && it->n_draft == 0) eng_sample(e, r, row, -1, NULL);
    }
    if (e->mtp) eng_mtp_catchup(e, sb);
    eng_note_kv(e);
}
