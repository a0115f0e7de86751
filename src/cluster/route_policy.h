/* route_policy.h - the router's placement policies, each a pure function over
 * plain structs: no I/O, no clock, no globals, no allocation. Any state a
 * policy keeps between calls (the round-robin cursor) is passed in by the
 * caller. The router (cluster/router_*.c) and the cluster simulator call the
 * same functions, so a simulated placement is the production placement.
 *
 * Inputs: one route_worker per registered worker (what the router knows of
 * it now: its own in-flight accounting merged with the worker's last
 * GET /load report) and one route_request (the router's estimate of the
 * request: prompt tokens, the prefix each worker is believed to hold, the
 * cache-affinity key). Every policy returns the index of the chosen worker,
 * or -1 when no worker is eligible (none healthy, or all full: the caller
 * applies back-pressure - waits with a bound or answers 503).
 *
 * Eligible: healthy and accepting (not draining, not reporting full).
 *
 * Policies:
 *  - round robin: the next eligible worker after *cursor.
 *  - least requests: fewest running + waiting requests.
 *  - cache affinity (SGLang/vLLM routers' prefix-hash routing): rendezvous
 *    (highest-random-weight) consistent hashing of the request's prefix key
 *    over the eligible workers' ids, so removing a worker only moves its own
 *    keys; the key hashes the API key with the prefix, so tenants never share
 *    a worker's cache by construction. When the chosen worker's load exceeds
 *    the least loaded one's by more than balance_threshold requests, it falls
 *    back to least requests (SGLang's cache-aware balance rule).
 *  - prefill compute (issue 19): estimated attention compute of the uncached
 *    part of the prompt, cf_chunk_cost(cached, prompt - cached) on each
 *    worker, plus that worker's queued compute, divided by its relative speed:
 *    the worker that finishes this prefill first wins.
 *  - decode load (issue 19): memory pressure (KV tokens held + this
 *    request's, over KV capacity) and step-time pressure (the decode step
 *    cost running * linear + attn * kv_tokens after adding the request, over
 *    the cost of a full step at capacity), the larger of the two (the
 *    bottleneck); a worker whose free KV cannot hold the prompt is not
 *    eligible (full: back-pressure).
 * Ties break by fewer running requests, then lower index (deterministic). */
#ifndef CINFER_CLUSTER_ROUTE_POLICY_H
#define CINFER_CLUSTER_ROUTE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

typedef enum route_policy_kind {
    ROUTE_ROUND_ROBIN = 0,
    ROUTE_LEAST_REQUESTS,
    ROUTE_CACHE_AFFINITY,
    ROUTE_PREFILL_COMPUTE,
    ROUTE_DECODE_LOAD,
    ROUTE_POLICY_COUNT
} route_policy_kind;

typedef struct route_worker {
    uint64_t id; /* stable identity (hash of the worker's base URL) for consistent hashing */
    bool healthy; /* last health check passed */
    bool accepting; /* not draining, not full */
    int32_t running; /* requests running on it */
    int32_t waiting; /* requests queued on it (not yet admitted) */
    double queued_cost; /* estimated compute of the prefill work queued on it (cost units) */
    int64_t kv_tokens; /* accumulated KV length of its running requests */
    int64_t kv_capacity; /* KV tokens it can hold (0: unknown, memory pressure not used) */
    int32_t max_seqs; /* running requests it can hold (0: unknown -> 64) */
    double speed; /* relative compute rate (cost units per unit time); <= 0 means 1 */
    int32_t cached_tokens; /* prefix tokens of THIS request it is believed to hold */
} route_worker;

typedef struct route_request {
    int32_t prompt_tokens; /* estimated prompt length in tokens (>= 1) */
    int32_t max_tokens; /* expected generation (KV it will add); 0: unknown */
    uint64_t affinity_key; /* prefix hash including the API key */
} route_request;

typedef struct route_params {
    double linear_cost; /* base/compute_cost.h: per token weight work (> 0) */
    double attn_cost; /* per token per context position (>= 0) */
    int32_t balance_threshold; /* cache affinity: fall back to least requests beyond this gap */
} route_params;

/* linear_cost 1, attn_cost from a default shape, balance_threshold 8. */
route_params route_default_params(void);

/* The policy's name for flags, metrics and logs ("round_robin",
 * "least_requests", "cache_affinity", "prefill_compute", "decode_load"). */
const char *route_policy_name(route_policy_kind k);
/* Parses a name (also accepts rr, least, affinity, compute, kv). 0, or -1. */
int route_policy_parse(const char *name, route_policy_kind *out);

bool route_worker_eligible(const route_worker *w);

int route_round_robin(const route_worker *ws, int32_t n, uint64_t *cursor);
int route_least_requests(const route_worker *ws, int32_t n);
int route_cache_affinity(const route_worker *ws, int32_t n, const route_request *r, const route_params *p);
int route_prefill_compute(const route_worker *ws, int32_t n, const route_request *r, const route_params *p);
int route_decode_load(const route_worker *ws, int32_t n, const route_request *r, const route_params *p);

/* The estimated prefill finish (cost units / speed) route_prefill_compute
 * minimises, and the pressure route_decode_load minimises (> 1: would
 * overflow), for /workers and tests. */
double route_prefill_score(const route_worker *w, const route_request *r, const route_params *p);
double route_decode_score(const route_worker *w, const route_request *r, const route_params *p);

/* Dispatch by kind; cursor is used by round robin only. */
int route_pick(route_policy_kind k, const route_worker *ws, int32_t n, const route_request *r, const route_params *p,
               uint64_t *cursor);

#endif
