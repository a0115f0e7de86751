/* sim_inst.c - one simulated engine instance: each step builds the
 * scheduler's input from the instance's requests, calls the engine's own
 * planner (sched_plan_step), applies the plan (preemptions, block
 * allocation, computed positions, speculative acceptance), prices it with
 * the cost model and schedules the step's end; at the end, sampled tokens
 * are delivered. Plan buffers grow with the instance's list (amortised;
 * never in a step that does not grow). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_cost.h"
#include "sim/sim_state.h"

int sim_inst_init(sim_state *s, sim_inst *in, int pool, cf_err *err) {
    const sim_pool_cfg *p = pool == SIM_POOL_PREFILL ? &s->c->prefill : &s->c->decode;
    *in = (sim_inst){.pool = pool};
    double frac = pool == SIM_POOL_PREFILL ? p->prefix_cache_fraction : 0;
    in->free_blocks = (int64_t)((double)p->kv_blocks * (1 - frac));
    size_t cache_blocks =
        (size_t)((double)p->kv_blocks * frac * (double)p->block_tokens / (double)s->c->store_block_tokens);
    if (sim_map_init(&in->hbm, cache_blocks ? cache_blocks : 1)) return cf_fail(err, "out of memory");
    return 0;
}

void sim_inst_free(sim_inst *in) {
    free(in->list);
    free(in->pend);
    free(in->sr);
    free(in->sr_req);
    free(in->items);
    free(in->pre);
    free(in->scratch);
    sim_map_free(&in->hbm);
}

static int grow_plan(sim_inst *in, int32_t need, cf_err *err) {
    if (need <= in->cap_plan) return 0;
    int32_t cap = in->cap_plan ? in->cap_plan : 64;
    while (cap < need) cap *= 2;
    sched_req *sr = realloc(in->sr, (size_t)cap * sizeof *sr);
    if (sr) in->sr = sr;
    int32_t *m = sr ? realloc(in->sr_req, (size_t)cap * sizeof *m) : NULL;
    if (m) in->sr_req = m;
    sched_item *it = m ? realloc(in->items, (size_t)cap * sizeof *it) : NULL;
    if (it) in->items = it;
    int32_t *pre = it ? realloc(in->pre, (size_t)cap * sizeof *pre) : NULL;
    if (pre) in->pre = pre;
    int32_t *sc = pre ? realloc(in->scratch, (size_t)cap * 2 * sizeof *sc) : NULL;
    if (!sc) return cf_fail(err, "out of memory");
    in->scratch = sc;
    in->cap_plan = cap;
    return 0;
}

int sim_inst_add(sim_state *s, sim_inst *in, int32_t q, cf_err *err) {
    (void)s;
    if (in->n == in->cap) {
        int32_t cap = in->cap ? 2 * in->cap : 64;
        int32_t *l = realloc(in->list, (size_t)cap * sizeof *l);
        if (!l) return cf_fail(err, "out of memory");
        in->list = l;
        in->cap = cap;
    }
    int32_t i = in->n;
    while (i > 0 && in->list[i - 1] > q) i--;
    memmove(in->list + i + 1, in->list + i, (size_t)(in->n - i) * sizeof *in->list);
    in->list[i] = q;
    in->n++;
    return grow_plan(in, in->n, err);
}

void sim_inst_remove(sim_inst *in, int32_t q) {
    int32_t lo = 0, hi = in->n;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (in->list[mid] < q) lo = mid + 1;
        else hi = mid;
    }
    if (lo < in->n && in->list[lo] == q) {
        memmove(in->list + lo, in->list + lo + 1, (size_t)(in->n - lo - 1) * sizeof *in->list);
        in->n--;
    }
}

static const sim_pool_cfg *pool_of(const sim_state *s, const sim_inst *in) {
    return in->pool == SIM_POOL_PREFILL ? &s->c->prefill : &s->c->decode;
}

/* Decode pool: requests whose KV arrived join when blocks and sequence slots allow (FIFO). */
static int admit_pending(sim_state *s, sim_inst *in, cf_err *err) {
    const sim_pool_cfg *p = pool_of(s, in);
    int32_t k = 0;
    while (k < in->n_pend) {
        int32_t q = in->pend[k];
        sim_rq *rq = &s->rq[q];
        int64_t need = (rq->n_computed + p->block_tokens - 1) / p->block_tokens;
        if (in->n >= s->lim[in->pool].max_seqs || in->free_blocks < need) break;
        rq->st = SCHED_RUNNING;
        rq->n_blocks = (int32_t)need;
        in->free_blocks -= need;
        if (sim_inst_add(s, in, q, err)) return -1;
        k++;
    }
    memmove(in->pend, in->pend + k, (size_t)(in->n_pend - k) * sizeof *in->pend);
    in->n_pend -= k;
    return 0;
}

/* The scheduler's view of the instance's requests; those that joined after `joined_by` are left out (the
 * step already planned when they came; *deferred counts them). */
static int32_t build_input(sim_state *s, sim_inst *in, double joined_by, int32_t *deferred) {
    const sim_pool_cfg *p = pool_of(s, in);
    int32_t n = 0, waiting = s->lim[in->pool].max_seqs;
    *deferred = 0;
    for (int32_t i = 0; i < in->n; i++) {
        int32_t q = in->list[i];
        const sim_rq *rq = &s->rq[q];
        const sim_wreq *wr = &s->w->r[q];
        if (rq->st != SCHED_RUNNING && rq->ready > joined_by) {
            (*deferred)++;
            continue;
        }
        if (rq->st != SCHED_RUNNING && waiting-- <= 0) continue;
        sched_req *r = &in->sr[n];
        *r = (sched_req){.state = rq->st,
                         .arrival = (uint64_t)q,
                         .prompt_len = wr->input_len,
                         .n_generated = rq->n_generated,
                         .max_tokens = wr->output_len,
                         .n_computed = rq->n_computed,
                         .n_cached = rq->admitted_once ? 0 : rq->n_cached,
                         .n_blocks = rq->n_blocks,
                         .n_reclaimable = rq->n_blocks};
        int32_t seq = wr->input_len + rq->n_generated;
        if (p->spec_draft > 0 && rq->st == SCHED_RUNNING && rq->n_generated > 0 && rq->n_computed == seq - 1) {
            int32_t left = wr->output_len - rq->n_generated - 1;
            r->n_draft = left < p->spec_draft ? (left > 0 ? left : 0) : (int32_t)p->spec_draft;
        }
        in->sr_req[n++] = q;
    }
    return n;
}

/* Classifies the positions [start, start + n) a plan item computes for request q. */
static void account_item(sim_state *s, int32_t q, const sched_item *it, int32_t kept) {
    sim_rq *rq = &s->rq[q];
    sim_req_result *rr = &s->r->req[q];
    const sim_wreq *wr = &s->w->r[q];
    int32_t replay_lo = rq->hit_hbm + rq->hit_store - rq->replay, replay_hi = rq->hit_hbm + rq->hit_store;
    rr->executed += it->n_tokens;
    for (int32_t p = it->start; p < it->start + kept; p++) {
        if (p < rq->hw) rr->recomputed++;
        else if (p < wr->input_len && p >= replay_lo && p < replay_hi) rr->replayed++;
        else if (p < wr->input_len) rr->computed++;
    }
    if (it->start + kept > rq->hw) rq->hw = it->start + kept;
}

static void apply_plan(sim_state *s, sim_inst *in, const sched_plan *plan) {
    const sim_pool_cfg *p = pool_of(s, in);
    sim_pool_result *pr = &s->r->pool[in->pool];
    for (int32_t i = 0; i < plan->n_preempted; i++) {
        int32_t q = in->sr_req[plan->preempted[i]];
        sim_rq *rq = &s->rq[q];
        in->free_blocks += rq->n_blocks;
        in->queued_tokens += rq->n_computed < s->w->r[q].input_len ? rq->n_computed : s->w->r[q].input_len;
        rq->n_blocks = 0;
        rq->n_computed = 0;
        rq->st = SCHED_PREEMPTED;
        pr->preemptions++;
    }
    for (int32_t i = 0; i < plan->n_items; i++) {
        sched_item *it = &plan->items[i];
        int32_t q = in->sr_req[it->req];
        it->req = q; /* from here on items name requests */
        sim_rq *rq = &s->rq[q];
        rq->n_blocks += it->new_blocks;
        in->free_blocks -= it->new_blocks;
        if (it->admitted) {
            if (!rq->admitted_once) {
                sim_req_result *rr = &s->r->req[q];
                int32_t cached = it->start;
                rr->cached_hbm = cached < rq->hit_hbm ? cached : rq->hit_hbm;
                rr->cached_store = cached - rr->cached_hbm;
                if (rq->hw < cached) rq->hw = cached;
                in->queued_tokens += rq->n_cached - cached; /* the block-aligned start recomputes a little */
            }
            rq->admitted_once = true;
            rq->st = SCHED_RUNNING;
        }
        int32_t kept = it->n_tokens;
        rq->step_accept = 0;
        if (it->kind == SCHED_DECODE) {
            int32_t d = it->n_tokens - 1, a = 0;
            while (a < d && sim_rng_uniform(&s->rng) < p->spec_accept) a++;
            rq->step_accept = a;
            kept = 1 + a;
            s->r->req[q].drafted += d;
            s->r->req[q].accepted += a;
            pr->decode_tokens += kept;
        } else {
            pr->prefill_tokens += it->n_tokens;
            int32_t prompt_part = s->w->r[q].input_len - it->start;
            if (prompt_part > 0) in->queued_tokens -= prompt_part < it->n_tokens ? prompt_part : it->n_tokens;
        }
        account_item(s, q, it, kept);
        rq->n_computed = it->start + kept;
    }
}

int sim_inst_kick(sim_state *s, int32_t idx, cf_err *err) {
    sim_inst *in = &s->inst[idx];
    if (in->busy) return 0;
    /* asynchronous scheduling: right after a step the next plan is the one made when that step started */
    bool defer = in->just_ended && pool_of(s, in)->async_scheduling;
    in->just_ended = false;
    if (in->n_pend && admit_pending(s, in, err)) return -1;
    if (in->n == 0) return 0;
    int32_t deferred = 0;
    sched_plan plan = {.items = in->items, .preempted = in->pre, .scratch = in->scratch};
    for (;;) {
        int32_t n = build_input(s, in, defer ? in->step_start : INFINITY, &deferred);
        sched_input si = {.reqs = in->sr,
                          .n_reqs = n,
                          .free_blocks = (int32_t)(in->free_blocks > INT32_MAX ? INT32_MAX : in->free_blocks),
                          .block_tokens = (int32_t)pool_of(s, in)->block_tokens,
                          .limits = s->lim[in->pool]};
        if (sched_plan_step(&si, &plan, err)) return -1;
        if (plan.n_items > 0 || plan.n_preempted > 0 || deferred == 0) break;
        defer = false; /* that plan was empty: the engine plans again at once, with the newcomers */
    }
    if (plan.n_items == 0 && plan.n_preempted == 0) return 0; /* nothing fits now: a later event kicks again */
    apply_plan(s, in, &plan);
    in->n_items = plan.n_items;
    sim_step_cost c = sim_step_time(&s->c->model, pool_of(s, in), in->items, plan.n_items, s->moe_imbalance[in->pool]);
    sim_pool_result *pr = &s->r->pool[in->pool];
    pr->busy_s += c.total_s;
    pr->steps++;
    in->busy = true;
    in->step_start = s->now;
    if (sim_heap_push(&s->heap, s->now + c.total_s, SIM_EV_STEP_END, idx)) return cf_fail(err, "out of memory");
    return 0;
}

int sim_inst_step_end(sim_state *s, int32_t idx, cf_err *err) {
    sim_inst *in = &s->inst[idx];
    in->busy = false;
    in->just_ended = true;
    for (int32_t i = 0; i < in->n_items; i++) {
        const sched_item *it = &in->items[i];
        if (!it->sample) continue;
        int32_t q = it->req;
        sim_rq *rq = &s->rq[q];
        const sim_wreq *wr = &s->w->r[q];
        if (rq->n_generated == 0) {
            rq->n_generated = 1;
            s->r->req[q].ttft = s->now - wr->arrival;
            if (sim_prefill_done(s, idx, q, err)) return -1;
            continue;
        }
        rq->n_generated += 1 + rq->step_accept;
        if (rq->n_generated >= wr->output_len) sim_request_done(s, q);
    }
    in->n_items = 0;
    return sim_inst_kick(s, idx, err);
}
