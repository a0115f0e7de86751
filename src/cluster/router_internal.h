/* router_internal.h - the router's shared state between its files:
 * router.c (server, routes, signals, drain), router_proxy.c (one client
 * request's forwarding, relay and retries), router_workers.c (worker table,
 * health and load polling, /workers), router_metrics.c (/metrics),
 * router_prompt.c (what a request's prompt is, for placement estimates).
 * Everything here is owned by the router and touched only on its event loop
 * thread. */
#ifndef CINFER_CLUSTER_ROUTER_INTERNAL_H
#define CINFER_CLUSTER_ROUTER_INTERNAL_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/prefix_index.h"
#include "cluster/route_policy.h"
#include "cluster/router.h"

#define ROUTER_LAT_BUCKETS 14

/* One worker: its spec, the policy view, the router's own accounting, what
 * its last GET /load said, and its counters. */
typedef struct router_worker {
    char url[256]; /* base URL without a trailing '/' */
    char host[200];
    int port;
    router_role role;
    route_worker view; /* what the policies see (view.cached_tokens is per request, set before a pick) */
    int32_t inflight; /* requests the router has open on it now */
    double inflight_cost; /* estimated prefill compute of requests sent and not yet answered (headers) */
    int64_t inflight_kv; /* estimated KV tokens of the router's requests on it */
    /* last /load report (-1: never) */
    int32_t rep_running, rep_waiting;
    int64_t rep_kv_tokens;
    bool rep_draining;
    double last_ok; /* time of the last successful health check */
    int32_t consecutive_fails;
    bool probing; /* a health / load probe is in flight (its callback has not run) */
    double probe_started; /* when the probe in flight (or the last one) was started */
    uint64_t n_probes_abandoned; /* probes whose callback never came within the limit */
    /* The probe's connection: owned by the router (never auto-freed by libevent), freed by the
     * next poll round once the callback ran or the probe was abandoned, or at teardown. */
    struct evhttp_connection *probe_conn;
    struct router *owner; /* for the probe callback */
    int32_t index;
    uint64_t n_requests, n_errors, n_retries_from, n_full;
    uint64_t decisions[ROUTE_POLICY_COUNT];
} router_worker;

typedef struct router_metrics {
    uint64_t requests_by_class[6]; /* 1xx..5xx answered to clients (index status/100), [0]: client gone */
    uint64_t retries, resumes, upstream_errors, backpressure_waits, backpressure_timeouts, handoffs, handoff_failures;
    uint64_t lat_counts[ROUTER_LAT_BUCKETS + 1]; /* end-to-end seconds histogram (cumulative on render) */
    double lat_sum;
    uint64_t lat_n;
    uint64_t ttfb_counts[ROUTER_LAT_BUCKETS + 1];
    double ttfb_sum;
    uint64_t ttfb_n;
} router_metrics;

typedef struct router router;
typedef struct proxy_req proxy_req;

/* Which worker answered a stored Responses response (its X-Request-Id): a follow-up with
 * previous_response_id goes there. A direct-mapped table keyed by hash(tenant, id); a slot is
 * overwritten by a newer response (then the follow-up finds the holder by the 404 retry below). */
#define ROUTER_RESP_SLOTS 4096
typedef struct router_resp_slot {
    uint64_t key; /* 0: empty */
    int32_t worker;
} router_resp_slot;

struct router {
    const router_config *cfg;
    struct event_base *base;
    struct evhttp *http;
    router_worker *w;
    int32_t n_w;
    route_worker *scratch; /* n_w entries: the policy input of one pick */
    prefix_index ix;
    uint64_t rr_cursor;
    double tokens_per_byte; /* learned from usage: prompt tokens per canonical prompt byte */
    router_metrics m;
    struct event *health_timer, *sig_term, *sig_int, *drain_timer;
    bool draining;
    int32_t active; /* client requests in flight */
    int64_t n_flushing; /* finished replies evhttp is still writing (the drain waits for them) */
    proxy_req *reqs; /* doubly linked list of requests in flight */
    struct evbuffer *scratch_buf;
    router_resp_slot *resp_owner; /* ROUTER_RESP_SLOTS entries */
};

/* ---- router_workers.c ---- */
int router_workers_init(router *r, cf_err *err);
void router_workers_free(router *r);
/* Starts one round of probes (GET /load on every worker; falls back to /health). */
void router_workers_poll(router *r);
/* Copies the workers' views into r->scratch for a pick among workers of `role`
 * (BOTH also matches...) with `exclude` (bitmask of tried workers: 64 max) and
 * cached-prefix estimates for chain[0..n_chain). Ineligible ones are marked. */
void router_workers_view(router *r, router_role role, uint64_t exclude, const uint64_t *chain, int32_t n_chain,
                         int32_t prompt_tokens);
/* A request's prompt (chain[0..n)) goes to worker i: its memory cache will hold the prefix; with
 * computed (a prefill or monolithic step, not a decode step after a handoff) and cfg->store_shared,
 * so will the shared store (prefix index slot n_w), which every worker can load from. */
void router_note_prefix(router *r, int32_t i, const uint64_t *chain, int32_t n, bool computed);
/* A request to worker i failed to connect or died before answering. */
void router_worker_failed(router *r, int32_t i);
/* JSON for GET /workers (malloc'd). */
char *router_workers_json(const router *r);

/* ---- router_metrics.c ---- */
void router_metrics_observe(double *sum, uint64_t *n, uint64_t *counts, double v);
/* Prometheus text (malloc'd, *len), or NULL on out of memory. */
char *router_metrics_render(const router *r, size_t *len);

/* ---- router_prompt.c ---- */
typedef struct router_prompt {
    char *text; /* canonical prompt bytes (malloc'd), or NULL */
    size_t len;
    char tenant[128]; /* the API key (Authorization / x-api-key), truncated */
    int32_t max_tokens; /* from the request (0: not given) */
    bool stream;
    char prev_response[128]; /* Responses: previous_response_id ("" when none or too long) */
} router_prompt;
/* Derives the canonical prompt of a JSON body for path (chat: tools + messages; completions: prompt;
 * messages: tools + system + messages; responses: instructions + tools + input). Never fails: a body
 * that is not JSON gives text NULL (the worker will answer the 400). */
void router_prompt_from_body(const char *path, const char *body, size_t len, router_prompt *out);
void router_prompt_free(router_prompt *p);

/* ---- router_proxy.c ---- */
/* Takes over a client request to an API path (POST or GET passthrough). */
void router_proxy_start(router *r, struct evhttp_request *client, const char *path);
/* Cancels every request in flight (the drain deadline). */
void router_proxy_cancel_all(router *r);

/* ---- router_prefill.c: PD step 1 beside step 2 (the overlapped two steps) ---- */
typedef struct prefill_side prefill_side;
typedef void (*prefill_side_done_fn)(void *ctx, int status, bool failed);
typedef struct prefill_side_args {
    enum evhttp_cmd_type cmd;
    const char *uri;
    const struct evkeyvalq *headers; /* the client's; hop-by-hop ones (is_hop) are left out */
    bool (*is_hop)(const char *key);
    const void *body;
    size_t body_len;
    const char *handoff_id, *decode_url;
    route_policy_kind policy;
    double cost; /* estimated prefill compute, accounted on the worker while open */
} prefill_side_args;
/* Sends step 1 to worker; done runs once when it ended (status 0 and failed: no answer). NULL when it
 * could not be sent (out of memory). */
prefill_side *prefill_side_start(router *r, int32_t worker, const prefill_side_args *a, prefill_side_done_fn done,
                                 void *ctx);
/* Cancels a step 1 in flight (P detaches: it tells D to stop waiting); done does not run. */
void prefill_side_cancel(prefill_side *s);
/* POST <decode worker>/handoff/abort for handoff_id, fire and forget: D stops waiting for it. */
void router_handoff_abort(router *r, int32_t decode_worker, const char *handoff_id, const char *auth);

/* ---- router.c ---- */
/* Frees an outgoing connection on the next loop turn. The router's upstream connections are
 * never auto-freed (libevent 2.1 frees an auto-free connection on some failure paths and keeps
 * it on others, e.g. a refused connect, depending on errno), so the router owns each one and
 * frees it exactly once, after its request's callback (or a cancel), never inside the callback. */
void router_free_conn_later(router *r, struct evhttp_connection *c);
/* A request finished (or was dropped): recount and maybe exit the drain. */
void router_request_done(router *r);

#endif
