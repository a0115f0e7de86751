/* metrics.h - the server's Prometheus metrics: counters, gauges sampled from
 * the engine, and fixed-bucket histograms, rendered in the text exposition
 * format 0.0.4 for GET /metrics. Owned by the server; touched only on the
 * HTTP loop thread, so nothing here locks. Names are prefixed cinfer_ (see
 * docs/serve.md for the list and the vLLM counterparts); every sample carries
 * a model_name label (vLLM's convention, so dashboards can filter alike). */
#ifndef CINFER_SERVE_METRICS_H
#define CINFER_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/engine.h"

#define METRICS_MAX_BUCKETS 24

typedef struct metrics_hist {
    const double *bounds; /* upper bounds, ascending (static) */
    int n_bounds;
    uint64_t counts[METRICS_MAX_BUCKETS + 1]; /* per bucket, last = +Inf */
    double sum;
    uint64_t count;
} metrics_hist;

typedef struct metrics_status_count {
    int status;
    uint64_t n;
} metrics_status_count;

typedef struct metrics {
    metrics_status_count by_status[16]; /* requests by HTTP status (first 16 distinct statuses) */
    int n_status;
    uint64_t prompt_tokens, generation_tokens, cached_tokens;
    uint64_t cancelled, disconnected;
    uint64_t stream_pauses; /* streams paused for a full connection buffer (backpressure) */
    metrics_hist ttft, itl, e2e;
    int64_t inflight; /* requests accepted and not finished (server view) */
    int64_t connections_open; /* client connections open (conn_guard.c) */
    uint64_t connections_refused; /* ... refused by --max-connections */
    uint64_t connection_timeouts; /* ... closed by a header / body / idle timeout */
    uint64_t accept_pauses; /* listener pauses after accept() errors (EMFILE...) */
    const char *model_name; /* the model_name label on every series (NULL: "") ; borrowed */
} metrics;

void metrics_init(metrics *m);
void metrics_request_done(metrics *m, int status);
/* Adds `weight` observations of value v. */
void metrics_observe(metrics_hist *h, double v, uint64_t weight);
/* Renders everything, with gauges from engine stats and, when e is given, the
 * MoE expert load (cinfer_moe_expert_tokens, cinfer_moe_expert_imbalance).
 * *out is malloc'd. */
int metrics_render(const metrics *m, const cinfer_engine_stats *st, cinfer_engine *e, char **out, size_t *len);
/* Appends what fn(ctx) renders (serve_config.extra_metrics), labelled with m's model_name like every
 * other sample, to *txt (malloc'd, *len bytes); on any failure *txt is left as it was. */
void metrics_append(const metrics *m, char **txt, size_t *len, int (*fn)(void *ctx, char **out, size_t *len),
                    void *ctx);
/* Copies Prometheus text `in`, adding model_name="NAME" as the first label of
 * every sample line (comments are copied as they are). *out is malloc'd;
 * -1 when out of memory. */
int metrics_label_all(const char *in, size_t len, const char *name, char **out, size_t *out_len);

#endif
