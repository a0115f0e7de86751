/* sim_workload.c - see sim_workload.h. */
#include "sim/sim_workload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "benchserve/trace.h"
#include "benchserve/workload.h"
#include "sim/sim_rng.h"
#include "store/store_format.h"

static uint64_t chain(uint64_t parent, uint64_t content) {
    uint64_t k = sim_mix64(parent ^ sim_mix64(content + 0x5151));
    return k ? k : 1;
}

static sim_wreq *push_req(sim_workload *w, uint32_t n_keys) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 1024;
        sim_wreq *r = realloc(w->r, cap * sizeof *r);
        if (!r) return NULL;
        w->r = r;
        w->cap = cap;
    }
    if (w->n_keys + n_keys > w->cap_keys) {
        size_t cap = w->cap_keys ? w->cap_keys : 4096;
        while (cap < w->n_keys + n_keys) cap *= 2;
        uint64_t *k = realloc(w->keys, cap * sizeof *k);
        if (!k) return NULL;
        w->keys = k;
        w->cap_keys = cap;
    }
    sim_wreq *q = &w->r[w->n++];
    *q = (sim_wreq){.n_keys = n_keys, .key_off = w->n_keys};
    w->n_keys += n_keys;
    return q;
}

void sim_workload_free(sim_workload *w) {
    free(w->r);
    free(w->keys);
    *w = (sim_workload){0};
}

int sim_workload_from_trace(const char *path, long max_lines, double time_scale, long replicas, long block,
                            uint64_t seed, sim_workload *w, cf_err *err) {
    *w = (sim_workload){.block_tokens = block};
    if (time_scale <= 0 || replicas < 1 || block < 1 || block > BS_TRACE_BLOCK)
        return cf_fail(err, "trace: time scale must be > 0, replicas >= 1 and block in [1, %d]", BS_TRACE_BLOCK);
    bs_trace t;
    if (bs_trace_load(path, (size_t)(max_lines > 0 ? max_lines : 0), &t, err)) return -1;
    sim_rng rng;
    sim_rng_seed(&rng, seed);
    double t0 = t.reqs[0].t_ms, span = (t.reqs[t.n - 1].t_ms - t0) / 1000.0;
    double gap = t.n > 1 ? span / (double)(t.n - 1) : 1.0;
    int rc = 0;
    for (long c = 0; c < replicas && !rc; c++) {
        for (size_t i = 0; i < t.n; i++) {
            const bs_trace_req *tr = &t.reqs[i];
            long in = bs_trace_scaled_input(tr, block);
            uint32_t nk = (uint32_t)(in / block); /* full blocks only: the store keeps those */
            sim_wreq *q = push_req(w, nk);
            if (!q) {
                rc = cf_fail(err, "out of memory");
                break;
            }
            double jitter = c ? sim_rng_uniform(&rng) * gap : 0;
            q->arrival = ((tr->t_ms - t0) / 1000.0 + jitter) / time_scale;
            q->input_len = (int32_t)(in > INT32_MAX / 2 ? INT32_MAX / 2 : in);
            q->output_len = (int32_t)(tr->output_len < 1 ? 1 : tr->output_len > 1 << 20 ? 1 << 20 : tr->output_len);
            q->cls = STORE_CLASS_CHAT;
            uint64_t k = (uint64_t)c * 0x100000001b3ull;
            for (uint32_t b = 0; b < nk; b++) w->keys[q->key_off + b] = k = chain(k, tr->hash[b] ^ ((uint64_t)c << 48));
        }
    }
    bs_trace_free(&t);
    if (!rc) rc = sim_workload_sort(w, err);
    if (rc) sim_workload_free(w);
    return rc;
}

int sim_workload_synthetic(const sim_synth_opts *so, uint64_t seed, long block_tokens, sim_workload *w, cf_err *err) {
    *w = (sim_workload){.block_tokens = block_tokens};
    bs_wl_opts o = {.kind = BS_WL_SYNTHETIC,
                    .seed = seed,
                    .requests = so->requests,
                    .input_len = so->input_len,
                    .output_len = so->output_len,
                    .uniform = so->uniform,
                    .rate = so->rate,
                    .prefix_share = so->prefix_share,
                    .prefix_pool = so->prefix_pool,
                    .token_ids = 1,
                    .tok_lo = 100,
                    .tok_hi = 30000};
    bs_workload bw;
    if (block_tokens < 1) return cf_fail(err, "synthetic: block tokens must be >= 1");
    if (bs_workload_build(&o, &bw, err)) return -1; /* checks the prefix share and pool */
    int rc = 0;
    for (size_t i = 0; i < bw.n && !rc; i++) {
        if (bs_workload_begin_turn(&bw, i, err)) {
            rc = -1;
            break;
        }
        bs_session *s = &bw.s[i];
        uint32_t nk = (uint32_t)(s->n_ids / (size_t)block_tokens);
        sim_wreq *q = push_req(w, nk);
        if (!q) {
            rc = cf_fail(err, "out of memory");
            break;
        }
        q->arrival = s->arrival;
        q->input_len = (int32_t)s->n_ids;
        q->output_len = (int32_t)s->max_tokens[0];
        q->cls = STORE_CLASS_DEFAULT;
        uint64_t k = 0; /* blocks chained over the prompt's token ids: a shared prefix's blocks match */
        for (uint32_t b = 0; b < nk; b++) {
            uint64_t h = 0;
            for (long j = 0; j < block_tokens; j++) h = sim_mix64(h ^ (uint64_t)s->ids[(size_t)b * block_tokens + j]);
            w->keys[q->key_off + b] = k = chain(k, h);
        }
        bs_workload_release(&bw, i);
    }
    bs_workload_free(&bw);
    if (!rc) rc = sim_workload_sort(w, err);
    if (rc) sim_workload_free(w);
    return rc;
}

sim_session_model sim_session_defaults(void) {
    sim_session_model m = {.sessions_per_s = 1.0, .duration_s = 86400, .agent_share = 0.5};
    /* chat (index 0): few turns, short messages, people come back over days */
    m.mean_turns[0] = 4, m.system_tokens[0] = 1024, m.turn_tokens[0] = 300, m.output_tokens[0] = 600;
    m.quick_median_s[0] = 60, m.quick_sigma[0] = 1.0;
    m.late_share[0] = 0.25, m.late_median_s[0] = 86400, m.late_sigma[0] = 1.2;
    /* agent (index 1): many turns, tool results, seconds apart; resumed within days */
    m.mean_turns[1] = 20, m.system_tokens[1] = 8192, m.turn_tokens[1] = 1500, m.output_tokens[1] = 400;
    m.quick_median_s[1] = 5, m.quick_sigma[1] = 0.8;
    m.late_share[1] = 0.05, m.late_median_s[1] = 6 * 3600, m.late_sigma[1] = 1.5;
    return m;
}

/* One session: turns whose prompts extend each other; keys chain over the growing conversation. */
static int one_session(const sim_session_model *m, sim_rng *rng, uint64_t sid, double start, long bt, sim_workload *w,
                       cf_err *err) {
    int c = sim_rng_uniform(rng) < m->agent_share;
    long turns = 1 + (long)sim_rng_exp(rng, m->mean_turns[c] > 1 ? m->mean_turns[c] - 1 : 1e-9);
    if (turns > 1000) turns = 1000;
    double t = start;
    long len = (long)m->system_tokens[c];
    uint64_t shared_system = (uint64_t)c + 1; /* every session of a class shares its system prompt */
    for (long k = 0; k < turns; k++) {
        len += 1 + (long)sim_rng_exp(rng, m->turn_tokens[c]);
        long out = 1 + (long)sim_rng_exp(rng, m->output_tokens[c]);
        if (len > 1 << 20) break;
        uint32_t nk = (uint32_t)(len / bt);
        sim_wreq *q = push_req(w, nk);
        if (!q) return cf_fail(err, "out of memory");
        q->arrival = t;
        q->input_len = (int32_t)len;
        q->output_len = (int32_t)out;
        q->cls = c ? STORE_CLASS_AGENT : STORE_CLASS_CHAT;
        uint64_t key = 0;
        long sys_blocks = (long)m->system_tokens[c] / bt;
        for (uint32_t b = 0; b < nk; b++)
            w->keys[q->key_off + b] = key =
                chain(key, (long)b < sys_blocks ? shared_system * 7919 + b : sid * 1000003 + b);
        len += out; /* the answer joins the conversation */
        bool late = sim_rng_uniform(rng) < m->late_share[c];
        t += late ? sim_rng_lognormal(rng, m->late_median_s[c], m->late_sigma[c])
                  : sim_rng_lognormal(rng, m->quick_median_s[c], m->quick_sigma[c]);
    }
    return 0;
}

int sim_workload_sessions(const sim_session_model *m, uint64_t seed, long bt, sim_workload *w, cf_err *err) {
    *w = (sim_workload){.block_tokens = bt};
    if (m->sessions_per_s <= 0 || m->duration_s <= 0 || bt < 1)
        return cf_fail(err, "sessions: rate, duration and block tokens must be > 0");
    sim_rng rng;
    sim_rng_seed(&rng, seed);
    uint64_t sid = 1;
    int rc = 0;
    for (double t = sim_rng_exp(&rng, 1.0 / m->sessions_per_s); t < m->duration_s && !rc;
         t += sim_rng_exp(&rng, 1.0 / m->sessions_per_s))
        rc = one_session(m, &rng, sid++, t, bt, w, err);
    if (!rc && w->n == 0) rc = cf_fail(err, "sessions: no session starts within the duration");
    if (!rc) rc = sim_workload_sort(w, err);
    if (rc) sim_workload_free(w);
    return rc;
}

static int cmp_arrival(const void *a, const void *b) {
    const sim_wreq *x = a, *y = b;
    if (x->arrival != y->arrival) return x->arrival < y->arrival ? -1 : 1;
    return x->key_off < y->key_off ? -1 : x->key_off > y->key_off; /* generation order */
}

int sim_workload_sort(sim_workload *w, cf_err *err) {
    (void)err;
    qsort(w->r, w->n, sizeof *w->r, cmp_arrival);
    w->duration_s = w->n ? w->r[w->n - 1].arrival : 0;
    return 0;
}
