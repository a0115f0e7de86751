/* sched.c - see sched.h. One pass per phase over indices sorted by rank in
 * the caller's scratch array (shell sort: in place, no allocation; the rank is
 * a total order, so the result does not depend on the sort's stability). */
#include "engine/sched.h"

#include <string.h>

enum { SCHED_MARK_NONE = 0, SCHED_MARK_SCHEDULED, SCHED_MARK_PREEMPTED };

/* Working state of one sched_plan_step call. */
typedef struct sched_work {
    const sched_input *in;
    sched_plan *plan;
    int32_t *mark; /* per request */
    int32_t free_blocks; /* left to hand out */
    int32_t tokens_left;
    double budget_left;
    bool prefilled; /* a prefill chunk is already in the plan */
} sched_work;

/* ---- cost model (the arithmetic is base/compute_cost.c, shared with the router) ---- */

double sched_attn_weight(const sched_shape *hp) { return cf_attn_weight(hp); }

sched_limits sched_default_limits(const sched_shape *hp) {
    return (sched_limits){
        .max_batch_tokens = 2048,
        .max_seqs = 64,
        .linear_cost = 1.0,
        .attn_cost = sched_attn_weight(hp),
        .min_prefill_chunk = 16,
    };
}

double sched_chunk_cost(const sched_limits *l, int32_t start, int32_t n) {
    return cf_chunk_cost(l->linear_cost, l->attn_cost, start, n);
}

/* Longest chunk from `start`, at most max_len tokens, within the budget left. */
static int32_t sched_chunk_len(sched_work *w, int32_t start, int32_t max_len) {
    const sched_limits *l = &w->in->limits;
    if (max_len > w->tokens_left) max_len = w->tokens_left;
    if (l->max_seq_chunk > 0 && max_len > l->max_seq_chunk) max_len = l->max_seq_chunk;
    if (max_len <= 0) return 0;
    int32_t lo = 0, hi = max_len; /* cost(lo) fits; find the largest that fits */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (sched_chunk_cost(l, start, mid) <= w->budget_left) lo = mid;
        else hi = mid - 1;
    }
    if (lo == 0 && !w->prefilled) lo = l->min_prefill_chunk < max_len ? l->min_prefill_chunk : max_len;
    return lo;
}

/* ---- ranking ---- */

static bool sched_before(const sched_req *r, int32_t a, int32_t b) {
    if (r[a].priority != r[b].priority) return r[a].priority < r[b].priority;
    if (r[a].arrival != r[b].arrival) return r[a].arrival < r[b].arrival;
    return a < b;
}

static void sched_sort(const sched_req *r, int32_t *idx, int32_t n) {
    static const int32_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        int32_t gap = gaps[g];
        for (int32_t i = gap; i < n; i++) {
            int32_t v = idx[i], j = i;
            for (; j >= gap && sched_before(r, v, idx[j - gap]); j -= gap) idx[j] = idx[j - gap];
            idx[j] = v;
        }
    }
}

/* ---- request arithmetic ---- */

static int32_t sched_seq_len(const sched_req *r) { return r->prompt_len + r->n_generated; }

static bool sched_active(const sched_req *r) { return r->n_generated < r->max_tokens; }

static bool sched_is_decode(const sched_req *r) {
    return r->state == SCHED_RUNNING && r->n_generated > 0 && sched_seq_len(r) - r->n_computed == 1;
}

static int32_t sched_blocks_for(int32_t tokens, int32_t bt) { return (tokens + bt - 1) / bt; }

static int32_t sched_new_blocks(const sched_req *r, int32_t start, int32_t n, int32_t bt, bool admitted) {
    int32_t need = sched_blocks_for(start + n, bt) - (admitted ? 0 : r->n_blocks);
    return need > 0 ? need : 0;
}

static int sched_check_input(const sched_input *in, const sched_plan *plan, cf_err *err) {
    const sched_limits *l = &in->limits;
    if (in->n_reqs < 0 || (in->n_reqs > 0 && (!in->reqs || !plan->items || !plan->preempted || !plan->scratch)))
        return cf_fail(err, "sched: %d requests without the arrays to plan them", in->n_reqs);
    if (in->block_tokens <= 0 || in->free_blocks < 0)
        return cf_fail(err, "sched: block_tokens %d, free_blocks %d (expected positive, non-negative)",
                       in->block_tokens, in->free_blocks);
    if (l->max_batch_tokens <= 0 || l->max_seqs <= 0 || l->min_prefill_chunk <= 0 || l->max_seq_chunk < 0 ||
        !(l->linear_cost > 0) || !(l->attn_cost >= 0))
        return cf_fail(err,
                       "sched: invalid limits (max_batch_tokens %d, max_seqs %d, min_prefill_chunk %d, "
                       "linear_cost %g, attn_cost %g)",
                       l->max_batch_tokens, l->max_seqs, l->min_prefill_chunk, l->linear_cost, l->attn_cost);
    for (int32_t i = 0; i < in->n_reqs; i++) {
        const sched_req *r = &in->reqs[i];
        if (r->state < SCHED_WAITING || r->state > SCHED_LOADING)
            return cf_fail(err, "sched: request %d has unknown state %d", i, (int)r->state);
        if (r->prompt_len < 1 || r->n_generated < 0 || r->max_tokens < 0 ||
            r->prompt_len > INT32_MAX / 2 - r->n_generated)
            return cf_fail(err, "sched: request %d has prompt_len %d, n_generated %d, max_tokens %d", i, r->prompt_len,
                           r->n_generated, r->max_tokens);
        if (r->state == SCHED_RUNNING &&
            (r->n_computed < 0 || r->n_computed > sched_seq_len(r) || r->n_blocks < 0 || r->n_reclaimable < 0 ||
             r->n_reclaimable > r->n_blocks || r->n_blocks < sched_blocks_for(r->n_computed, in->block_tokens)))
            return cf_fail(err, "sched: running request %d has n_computed %d of %d, %d blocks (%d reclaimable)", i,
                           r->n_computed, sched_seq_len(r), r->n_blocks, r->n_reclaimable);
        if (r->n_draft < 0) return cf_fail(err, "sched: request %d has n_draft %d", i, r->n_draft);
        if (r->state != SCHED_RUNNING && r->n_cached < 0)
            return cf_fail(err, "sched: request %d has n_cached %d", i, r->n_cached);
    }
    return 0;
}

/* ---- plan building ---- */

static void sched_add(sched_work *w, int32_t req, sched_kind kind, int32_t start, int32_t n, bool admitted) {
    const sched_req *r = &w->in->reqs[req];
    int32_t nb = sched_new_blocks(r, start, n, w->in->block_tokens, admitted);
    sched_plan *p = w->plan;
    p->items[p->n_items++] = (sched_item){
        .req = req,
        .kind = kind,
        .start = start,
        .n_tokens = n,
        .new_blocks = nb,
        .admitted = admitted,
        .sample = kind == SCHED_DECODE || start + n == sched_seq_len(r),
    };
    double c = sched_chunk_cost(&w->in->limits, start, n);
    w->mark[req] = SCHED_MARK_SCHEDULED;
    w->free_blocks -= nb;
    w->tokens_left -= n;
    w->budget_left -= c;
    p->cost += c;
    p->n_tokens += n;
    p->new_blocks += nb;
    if (kind == SCHED_PREFILL) w->prefilled = true;
}

/* Preempts the lowest-ranked running request not yet scheduled or preempted;
 * `order[0..*tail]` are the running requests in rank order. Returns it. */
static int32_t sched_preempt_one(sched_work *w, const int32_t *order, int32_t *tail) {
    while (*tail >= 0 && w->mark[order[*tail]] != SCHED_MARK_NONE) (*tail)--;
    if (*tail < 0) return -1;
    int32_t v = order[(*tail)--];
    w->mark[v] = SCHED_MARK_PREEMPTED;
    w->plan->preempted[w->plan->n_preempted++] = v;
    w->plan->n_running--;
    w->free_blocks += w->in->reqs[v].n_reclaimable;
    return v;
}

static bool sched_full(const sched_work *w) {
    return w->tokens_left <= 0 || w->plan->n_items >= w->in->limits.max_seqs;
}

/* Draft tokens a decode of r can verify within what is left of the step (tokens, budget, blocks),
 * keeping one token (and its cost) for each of the `later` decodes still to be planned. */
static int32_t sched_drafts(const sched_work *w, const sched_req *r, int32_t later) {
    const sched_limits *l = &w->in->limits;
    int32_t d = r->n_draft, bt = w->in->block_tokens, s = r->n_computed;
    if (d > w->tokens_left - 1 - later) d = w->tokens_left - 1 - later;
    if (l->max_seq_chunk > 0 && d > l->max_seq_chunk - 1) d = l->max_seq_chunk - 1; /* window rings */
    double keep = later * sched_chunk_cost(l, s, 1);
    while (d > 0 && (sched_new_blocks(r, s, 1 + d, bt, false) > w->free_blocks ||
                     sched_chunk_cost(l, s, 1 + d) + keep > w->budget_left))
        d--;
    return d > 0 ? d : 0;
}

static void sched_decodes(sched_work *w, const int32_t *order, int32_t n_run, int32_t *tail) {
    const sched_req *reqs = w->in->reqs;
    int32_t later = 0; /* decodes not planned yet (drafts leave room for their own tokens) */
    for (int32_t i = 0; i < n_run; i++) later += sched_is_decode(&reqs[order[i]]) && sched_active(&reqs[order[i]]);
    for (int32_t i = 0; i < n_run && !sched_full(w); i++) {
        int32_t q = order[i];
        const sched_req *r = &reqs[q];
        if (w->mark[q] != SCHED_MARK_NONE || !sched_is_decode(r) || !sched_active(r)) continue;
        later--;
        int32_t need = sched_new_blocks(r, r->n_computed, 1, w->in->block_tokens, false);
        while (need > w->free_blocks && w->mark[q] == SCHED_MARK_NONE)
            if (sched_preempt_one(w, order, tail) < 0) return; /* unreachable: q itself is a candidate */
        if (w->mark[q] == SCHED_MARK_NONE)
            sched_add(w, q, SCHED_DECODE, r->n_computed, 1 + sched_drafts(w, r, later), false);
    }
}

static void sched_running_prefills(sched_work *w, const int32_t *order, int32_t n_run, int32_t *tail) {
    const sched_req *reqs = w->in->reqs;
    int32_t bt = w->in->block_tokens;
    for (int32_t i = 0; i < n_run && !sched_full(w); i++) {
        int32_t q = order[i];
        const sched_req *r = &reqs[q];
        int32_t left = sched_seq_len(r) - r->n_computed;
        if (w->mark[q] != SCHED_MARK_NONE || sched_is_decode(r) || !sched_active(r) || left <= 0) continue;
        int32_t n = sched_chunk_len(w, r->n_computed, left);
        if (n == 0) break;
        while (w->mark[q] == SCHED_MARK_NONE) {
            int64_t fit = ((int64_t)r->n_blocks + w->free_blocks) * bt - r->n_computed;
            if (fit >= 1) {
                if (n > fit) n = (int32_t)fit;
                sched_add(w, q, SCHED_PREFILL, r->n_computed, n, false);
                break;
            }
            if (sched_preempt_one(w, order, tail) < 0) return; /* unreachable, as above */
        }
    }
}

static void sched_admit(sched_work *w, const int32_t *order, int32_t n_wait) {
    const sched_req *reqs = w->in->reqs;
    int32_t bt = w->in->block_tokens;
    for (int32_t i = 0; i < n_wait; i++) {
        int32_t q = order[i];
        const sched_req *r = &reqs[q];
        if (!sched_active(r)) continue;
        if (sched_full(w) || w->plan->n_running >= w->in->limits.max_seqs) break;
        int32_t len = sched_seq_len(r), start = r->n_cached < len - 1 ? r->n_cached : len - 1;
        start = start / bt * bt;
        int32_t n = sched_chunk_len(w, start, len - start);
        int64_t fit = (int64_t)w->free_blocks * bt - start;
        if (n > fit) n = fit > 0 ? (int32_t)fit : 0;
        if (n <= 0) break; /* FCFS: nobody behind it overtakes */
        sched_add(w, q, SCHED_PREFILL, start, n, true);
        w->plan->n_running++;
    }
}

int sched_plan_step(const sched_input *in, sched_plan *plan, cf_err *err) {
    if (sched_check_input(in, plan, err)) return -1;
    plan->n_items = plan->n_preempted = plan->n_tokens = plan->new_blocks = plan->n_running = 0;
    plan->cost = 0;
    plan->budget = sched_chunk_cost(&in->limits, 0, in->limits.max_batch_tokens);
    int32_t n = in->n_reqs, *order = plan->scratch, *mark = plan->scratch + n;
    sched_work w = {
        .in = in,
        .plan = plan,
        .mark = mark,
        .free_blocks = in->free_blocks,
        .tokens_left = in->limits.max_batch_tokens,
        .budget_left = plan->budget,
    };
    int32_t n_run = 0, n_wait = 0, n_loading = 0;
    for (int32_t i = 0; i < n; i++) {
        mark[i] = SCHED_MARK_NONE;
        if (in->reqs[i].state == SCHED_RUNNING) order[n_run++] = i;
        n_loading += in->reqs[i].state == SCHED_LOADING;
    }
    for (int32_t i = 0; i < n; i++)
        if (in->reqs[i].state == SCHED_WAITING || in->reqs[i].state == SCHED_PREEMPTED) order[n_run + n_wait++] = i;
    sched_sort(in->reqs, order, n_run);
    sched_sort(in->reqs, order + n_run, n_wait);
    plan->n_running = n_run + n_loading;
    int32_t tail = n_run - 1;
    sched_decodes(&w, order, n_run, &tail);
    sched_running_prefills(&w, order, n_run, &tail);
    sched_admit(&w, order + n_run, n_wait);
    return 0;
}
