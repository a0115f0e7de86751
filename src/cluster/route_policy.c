/* route_policy.c - see route_policy.h. Each policy is one pass over the
 * workers; ties break by running count, then index. */
#include "cluster/route_policy.h"

#include <string.h>

#include "base/compute_cost.h"

static const char *const route_names[ROUTE_POLICY_COUNT] = {
    "round_robin", "least_requests", "cache_affinity", "prefill_compute", "decode_load",
};
static const char *const route_short_names[ROUTE_POLICY_COUNT] = {"rr", "least", "affinity", "compute", "kv"};

route_params route_default_params(void) {
    return (route_params){.linear_cost = 1.0, .attn_cost = cf_attn_weight(NULL), .balance_threshold = 8};
}

const char *route_policy_name(route_policy_kind k) {
    return (unsigned)k < ROUTE_POLICY_COUNT ? route_names[k] : "unknown";
}

int route_policy_parse(const char *name, route_policy_kind *out) {
    if (!name) return -1;
    for (int i = 0; i < ROUTE_POLICY_COUNT; i++) {
        if (strcmp(name, route_names[i]) == 0 || strcmp(name, route_short_names[i]) == 0) {
            *out = (route_policy_kind)i;
            return 0;
        }
    }
    return -1;
}

bool route_worker_eligible(const route_worker *w) { return w->healthy && w->accepting; }

static int64_t route_load(const route_worker *w) { return (int64_t)w->running + w->waiting; }

/* Is score a (worker a) better than score b (worker b)? Lower score wins,
 * then fewer running requests, then the lower index (a < b in call order). */
static bool route_better(double sa, const route_worker *a, double sb, const route_worker *b) {
    if (sa != sb) return sa < sb;
    return a->running < b->running;
}

int route_round_robin(const route_worker *ws, int32_t n, uint64_t *cursor) {
    if (n <= 0) return -1;
    uint64_t start = *cursor % (uint64_t)n;
    for (int32_t k = 0; k < n; k++) {
        int32_t i = (int32_t)((start + (uint64_t)k) % (uint64_t)n);
        if (route_worker_eligible(&ws[i])) {
            *cursor = (uint64_t)i + 1;
            return i;
        }
    }
    return -1;
}

int route_least_requests(const route_worker *ws, int32_t n) {
    int best = -1;
    for (int32_t i = 0; i < n; i++) {
        if (!route_worker_eligible(&ws[i])) continue;
        if (best < 0 || route_better((double)route_load(&ws[i]), &ws[i], (double)route_load(&ws[best]), &ws[best]))
            best = i;
    }
    return best;
}

/* splitmix64 finaliser: a well-mixed 64-bit function of (key, id). */
static uint64_t route_mix(uint64_t key, uint64_t id) {
    uint64_t z = key ^ (id * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int route_cache_affinity(const route_worker *ws, int32_t n, const route_request *r, const route_params *p) {
    int best = -1;
    uint64_t best_w = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!route_worker_eligible(&ws[i])) continue;
        uint64_t w = route_mix(r->affinity_key, ws[i].id);
        if (best < 0 || w > best_w) best = i, best_w = w;
    }
    if (best < 0) return -1;
    int least = route_least_requests(ws, n);
    if (least >= 0 && route_load(&ws[best]) - route_load(&ws[least]) > p->balance_threshold) return least;
    return best;
}

static double route_speed(const route_worker *w) { return w->speed > 0 ? w->speed : 1.0; }

double route_prefill_score(const route_worker *w, const route_request *r, const route_params *p) {
    int32_t prompt = r->prompt_tokens > 0 ? r->prompt_tokens : 1;
    int32_t cached = w->cached_tokens < 0 ? 0 : w->cached_tokens;
    if (cached > prompt - 1) cached = prompt - 1; /* the last token is always computed */
    double own = cf_chunk_cost(p->linear_cost, p->attn_cost, cached, prompt - cached);
    return (w->queued_cost + own) / route_speed(w);
}

int route_prefill_compute(const route_worker *ws, int32_t n, const route_request *r, const route_params *p) {
    int best = -1;
    double best_s = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!route_worker_eligible(&ws[i])) continue;
        double s = route_prefill_score(&ws[i], r, p);
        if (best < 0 || route_better(s, &ws[i], best_s, &ws[best])) best = i, best_s = s;
    }
    return best;
}

double route_decode_score(const route_worker *w, const route_request *r, const route_params *p) {
    int64_t add = (int64_t)(r->prompt_tokens > 0 ? r->prompt_tokens : 1) + (r->max_tokens > 0 ? r->max_tokens : 0);
    int64_t kv = w->kv_tokens + add;
    int32_t seqs = w->max_seqs > 0 ? w->max_seqs : 64;
    double mem = w->kv_capacity > 0 ? (double)kv / (double)w->kv_capacity : 0.0;
    /* one decode step: a token per running request over its whole context */
    double step = (double)(w->running + 1) * p->linear_cost + p->attn_cost * (double)kv;
    double cap_kv = w->kv_capacity > 0 ? (double)w->kv_capacity : (double)kv;
    double full = (double)seqs * p->linear_cost + p->attn_cost * cap_kv;
    double step_p = step / full / route_speed(w);
    return mem > step_p ? mem : step_p;
}

int route_decode_load(const route_worker *ws, int32_t n, const route_request *r, const route_params *p) {
    int best = -1;
    double best_s = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!route_worker_eligible(&ws[i])) continue;
        if (ws[i].kv_capacity > 0 &&
            ws[i].kv_tokens + (r->prompt_tokens > 0 ? r->prompt_tokens : 1) > ws[i].kv_capacity)
            continue; /* the prompt alone would not fit: full */
        double s = route_decode_score(&ws[i], r, p);
        if (best < 0 || route_better(s, &ws[i], best_s, &ws[best])) best = i, best_s = s;
    }
    return best;
}

int route_pick(route_policy_kind k, const route_worker *ws, int32_t n, const route_request *r, const route_params *p,
               uint64_t *cursor) {
    switch (k) {
    case ROUTE_ROUND_ROBIN: return route_round_robin(ws, n, cursor);
    case ROUTE_LEAST_REQUESTS: return route_least_requests(ws, n);
    case ROUTE_CACHE_AFFINITY: return route_cache_affinity(ws, n, r, p);
    case ROUTE_PREFILL_COMPUTE: return route_prefill_compute(ws, n, r, p);
    case ROUTE_DECODE_LOAD: return route_decode_load(ws, n, r, p);
    default: return -1;
    }
}
