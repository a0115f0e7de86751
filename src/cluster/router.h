/* router.h - `cinfer router`: one HTTP front (libevent evhttp) for a set of
 * `cinfer serve` workers. It forwards each API request's body unchanged to
 * the worker a placement policy (cluster/route_policy.h) picks, relays the
 * answer (SSE chunk by chunk with back-pressure; status, error body, usage and
 * headers preserved), retries on another worker when one fails before its
 * answer started or reports itself full (429/503), health-checks and polls
 * every worker's GET /load, and serves its own /metrics, /workers, /health.
 *
 * router_run() owns the event loop (the caller's thread), the evhttp server,
 * the worker table and every request in flight; it returns after SIGTERM /
 * SIGINT once in-flight requests finished (or the drain deadline passed).
 * The router keeps no state a restart would lose: the worker list comes from
 * the flags/file, load is re-polled, and the prefix index is an estimate that
 * refills. Design and the load protocol: docs/router.md. */
#ifndef CINFER_CLUSTER_ROUTER_H
#define CINFER_CLUSTER_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "cluster/route_policy.h"

typedef enum router_role { ROUTER_ROLE_BOTH = 0, ROUTER_ROLE_PREFILL, ROUTER_ROLE_DECODE } router_role;

typedef struct router_worker_spec {
    char *url; /* base URL "http://host:port" (owned) */
    router_role role;
} router_worker_spec;

typedef struct router_config {
    const char *host; /* bind address */
    int port; /* 0: any free port (printed) */
    int listen_fd; /* > 0: an already bound listening socket (serve_listen-style); 0: bind host:port */
    router_worker_spec *workers; /* borrowed */
    int32_t n_workers;
    route_policy_kind policy; /* workers of role both */
    route_policy_kind prefill_policy, decode_policy; /* PD mode */
    route_params params;
    double health_interval_s; /* /health + /load polling period */
    double upstream_timeout_s; /* connect / idle read timeout towards a worker */
    double queue_timeout_s; /* how long a request waits for a worker that accepts (back-pressure) */
    int32_t max_attempts; /* tries per request (refused, killed before answering, full) */
    size_t max_body; /* request body limit (413 above) */
    size_t conn_buffer; /* unsent bytes to a client before its upstream is paused */
    double shutdown_timeout_s; /* SIGTERM: in-flight requests get this long */
    bool pd_sequential; /* PD: step 2 only after step 1 answered (default: both at once, D waits) */
    bool store_shared; /* --store-shared: the workers mount one persistent store, so a prefix any worker
                        * computed counts as cached on every worker (loaded from the store) */
} router_config;

/* Parses one "URL[@role]" (role: both|prefill|decode). 0, or -1 with err. */
int router_worker_parse(const char *arg, router_worker_spec *out, cf_err *err);
/* Reads a workers file: one URL[@role] per line, '#' comments, blank lines.
 * Appends to *specs (realloc'd). 0, or -1 with err naming the line. */
int router_workers_file(const char *path, router_worker_spec **specs, int32_t *n, cf_err *err);
void router_worker_specs_free(router_worker_spec *specs, int32_t n);

/* Runs until SIGTERM/SIGINT and the drain; prints "cinfer router: listening
 * on http://HOST:PORT". 0 after a clean shutdown, -1 when start-up fails. */
int router_run(const router_config *cfg, cf_err *err);

#endif
