/* router_metrics.c - the router's GET /metrics in Prometheus text format:
 * requests answered by status class, placement decisions per worker and
 * policy, requests/errors/full answers per worker, retries, upstream errors,
 * back-pressure waits, handoffs, worker health and in-flight counts, and
 * end-to-end / time-to-first-byte latency histograms. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/strbuf.h"
#include "cluster/router_internal.h"

static const double lat_bounds[ROUTER_LAT_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                      1,     2.5,  5,     10,   30,  60,   120};

void router_metrics_observe(double *sum, uint64_t *n, uint64_t *counts, double v) {
    int b = 0;
    while (b < ROUTER_LAT_BUCKETS && v > lat_bounds[b]) b++;
    counts[b]++;
    *sum += v;
    (*n)++;
}

static int addf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int addf(strbuf *b, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    return strbuf_append(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static int hist(strbuf *b, const char *name, const char *help, const uint64_t *counts, double sum, uint64_t n) {
    int rc = addf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < ROUTER_LAT_BUCKETS; i++) {
        cum += counts[i];
        rc |= addf(b, "%s_bucket{le=\"%g\"} %llu\n", name, lat_bounds[i], (unsigned long long)cum);
    }
    rc |= addf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)n, name, sum,
               name, (unsigned long long)n);
    return rc;
}

char *router_metrics_render(const router *r, size_t *len) {
    strbuf b = {0};
    const router_metrics *m = &r->m;
    int rc = addf(&b, "# HELP cinfer_router_requests_total Client requests answered, by status class\n"
                      "# TYPE cinfer_router_requests_total counter\n");
    static const char *const cls[6] = {"client_gone", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int i = 0; i < 6; i++)
        rc |= addf(&b, "cinfer_router_requests_total{status=\"%s\"} %llu\n", cls[i],
                   (unsigned long long)m->requests_by_class[i]);
    rc |= addf(&b,
               "# HELP cinfer_router_retries_total Requests sent again to another worker\n"
               "# TYPE cinfer_router_retries_total counter\ncinfer_router_retries_total %llu\n",
               (unsigned long long)m->retries);
    rc |= addf(&b,
               "# HELP cinfer_router_resumes_total Streams that broke after they started and were resumed on "
               "another worker\n# TYPE cinfer_router_resumes_total counter\ncinfer_router_resumes_total %llu\n",
               (unsigned long long)m->resumes);
    rc |= addf(&b,
               "# HELP cinfer_router_upstream_errors_total Worker connections that failed or broke\n"
               "# TYPE cinfer_router_upstream_errors_total counter\ncinfer_router_upstream_errors_total %llu\n",
               (unsigned long long)m->upstream_errors);
    rc |= addf(&b,
               "# HELP cinfer_router_backpressure_waits_total Picks that found no worker accepting and waited\n"
               "# TYPE cinfer_router_backpressure_waits_total counter\ncinfer_router_backpressure_waits_total %llu\n"
               "# HELP cinfer_router_backpressure_timeouts_total Requests that waited past --queue-timeout\n"
               "# TYPE cinfer_router_backpressure_timeouts_total counter\n"
               "cinfer_router_backpressure_timeouts_total %llu\n",
               (unsigned long long)m->backpressure_waits, (unsigned long long)m->backpressure_timeouts);
    rc |= addf(&b,
               "# HELP cinfer_router_handoffs_total PD requests whose prefill step succeeded / failed\n"
               "# TYPE cinfer_router_handoffs_total counter\ncinfer_router_handoffs_total{result=\"ok\"} %llu\n"
               "cinfer_router_handoffs_total{result=\"failed\"} %llu\n",
               (unsigned long long)m->handoffs, (unsigned long long)m->handoff_failures);
    rc |= addf(&b, "# HELP cinfer_router_decisions_total Placement decisions per worker and policy\n"
                   "# TYPE cinfer_router_decisions_total counter\n");
    for (int32_t i = 0; i < r->n_w; i++)
        for (int k = 0; k < ROUTE_POLICY_COUNT; k++)
            rc |= addf(&b, "cinfer_router_decisions_total{worker=\"%s\",policy=\"%s\"} %llu\n", r->w[i].url,
                       route_policy_name((route_policy_kind)k), (unsigned long long)r->w[i].decisions[k]);
    static const char *const per[][2] = {
        {"cinfer_router_worker_requests_total", "counter"}, {"cinfer_router_worker_errors_total", "counter"},
        {"cinfer_router_worker_full_total", "counter"},     {"cinfer_router_worker_inflight", "gauge"},
        {"cinfer_router_worker_healthy", "gauge"},
    };
    for (size_t k = 0; k < sizeof per / sizeof *per; k++) {
        rc |= addf(&b,
                   "# HELP %s Per worker (requests sent, failures, 429/503 answers, open now, health)\n# TYPE %s %s\n",
                   per[k][0], per[k][0], per[k][1]);
        for (int32_t i = 0; i < r->n_w; i++) {
            const router_worker *w = &r->w[i];
            unsigned long long v = k == 0   ? w->n_requests
                                   : k == 1 ? w->n_errors
                                   : k == 2 ? w->n_full
                                   : k == 3 ? (unsigned long long)w->inflight
                                            : (unsigned long long)w->view.healthy;
            rc |= addf(&b, "%s{worker=\"%s\"} %llu\n", per[k][0], w->url, v);
        }
    }
    rc |= hist(&b, "cinfer_router_request_seconds", "End-to-end seconds per client request", m->lat_counts, m->lat_sum,
               m->lat_n);
    rc |= hist(&b, "cinfer_router_first_byte_seconds", "Seconds from arrival to a worker's response headers",
               m->ttfb_counts, m->ttfb_sum, m->ttfb_n);
    if (rc) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
