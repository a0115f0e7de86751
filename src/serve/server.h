/* server.h - `cinfer serve`'s HTTP server: an OpenAI-compatible API on
 * libevent's evhttp, driving the engine (include/cinfer/engine.h).
 *
 * serve_run() owns the event loop thread (the caller's), the evhttp server,
 * the metrics and every in-flight request; it borrows the gen_model (engine,
 * tokenizer, template) which must outlive it. It returns after a graceful
 * shutdown (SIGTERM / SIGINT: stop accepting, let in-flight requests finish,
 * cancel what is left at the deadline). Endpoints, flags, metrics, threading
 * and backpressure are described in docs/serve.md. */
#ifndef CINFER_SERVE_SERVER_H
#define CINFER_SERVE_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "serve/gen.h"
#include "serve/model_names.h"
#include "serve/traffic.h"

typedef struct serve_config {
    const char *host; /* bind address (default 127.0.0.1) */
    int port; /* 0: any free port (printed) */
    const char *api_key; /* NULL: no authentication (ignored when keys has entries) */
    const traffic_keys *keys; /* NULL or empty: api_key alone; else any of these keys, with its default traffic class */
    int listen_fd; /* > 0: a listening socket from serve_listen (host/port then only label it;
                                * serve_run takes it over); 0: serve_run binds host:port itself */
    const char *model_name; /* the default served model name (names->v[0]) */
    const serve_names *names; /* every served model name (--served-model-name); not NULL */
    int32_t max_n; /* largest n per request */
    int32_t max_inflight; /* engine requests (choices) in flight before 429 */
    int32_t max_seqs; /* engine requests running at once (reported by GET /load) */
    int32_t kv_block_tokens; /* tokens per KV block (reported by GET /load) */
    size_t max_body; /* request body limit in bytes (413 above) */
    size_t conn_buffer; /* per-connection unsent bytes before a stream pauses */
    double shutdown_timeout_s; /* in-flight requests get this long after SIGTERM */
    int parser; /* recipe_parser_kind for chat output (reasoning / tool calls) */
    size_t response_store_max; /* Responses store: entries (0: store nothing) */
    size_t response_store_bytes; /* ... and bytes */
    double response_store_ttl_s; /* ... and seconds since last use */
    bool has_reasoning_budget_default; /* --reasoning-budget-default given (docs/serve.md "Reasoning budget") */
    int32_t reasoning_budget_default; /* ... its value in tokens (>= 0) */
    double header_timeout_s; /* --header-timeout: a request's headers must arrive within this (0: off) */
    double body_timeout_s; /* --body-timeout: ... and then its body (0: off) */
    double idle_timeout_s; /* --idle-timeout: a keep-alive connection between requests (0: off) */
    int32_t max_connections; /* --max-connections: open connections; more are refused (0: no limit) */
    bool share_prefix_cache; /* --share-prefix-cache: no per-tenant cache salt (serve/tenant.h) */
    /* More /metrics text (e.g. expert parallelism's rows): fills a malloc'd buffer, 0 ok; NULL: none. */
    int (*extra_metrics)(void *ctx, char **out, size_t *len);
    void *extra_metrics_ctx;
} serve_config;

/* Listens (on cfg->listen_fd when set, else binds host:port), prints
 * "cinfer serve: listening on http://HOST:PORT" to stderr, serves until
 * SIGTERM/SIGINT. Returns 0 after a clean shutdown, -1 when start-up fails
 * (err set; the process is expected to exit, a listen_fd not yet handed to
 * evhttp is not closed). */
int serve_run(const serve_config *cfg, const gen_model *gm, cf_err *err);

#endif
