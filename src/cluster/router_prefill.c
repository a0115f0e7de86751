/* router_prefill.c - PD step 1 run beside step 2 (docs/router.md, "PD
 * mode"): the request goes to the prefill worker P with X-Cinfer-Handoff-Id
 * and -To while the same request is already at the decode worker D, which
 * waits for the handoff (the contract allows either order). P's answer is
 * read only for accounting: the client gets D's answer. When step 1 does not
 * end in a handoff (P refused, failed or was unreachable), the router tells D
 * at once (POST /handoff/abort), so D computes the prompt instead of waiting
 * out its --handoff-timeout.
 *
 * Lifetime: a prefill_side lives from prefill_side_start until its upstream
 * request ended (done callback, then freed) or prefill_side_cancel (no
 * callback). It accounts itself on worker `worker` (in-flight count and
 * estimated compute) while open. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cluster/router_internal.h"

struct prefill_side {
    router *r;
    int32_t worker;
    double cost;
    struct evhttp_connection *conn;
    struct evhttp_request *req;
    int status;
    bool failed;
    prefill_side_done_fn done;
    void *ctx;
};

static void side_unaccount(prefill_side *s) {
    router_worker *w = &s->r->w[s->worker];
    w->inflight--;
    w->inflight_cost -= s->cost;
    if (w->inflight <= 0) w->inflight = 0, w->inflight_cost = 0, w->inflight_kv = 0;
}

static int on_side_header(struct evhttp_request *up, void *arg) {
    prefill_side *s = arg;
    s->status = evhttp_request_get_response_code(up);
    return 0;
}

static void on_side_error(enum evhttp_request_error e, void *arg) {
    prefill_side *s = arg;
    s->failed = true;
    LOG_INFO("router: prefill step on %s failed (libevent error %d)", s->r->w[s->worker].url, (int)e);
}

static void on_side_done(struct evhttp_request *up, void *arg) {
    prefill_side *s = arg;
    router *r = s->r;
    router_free_conn_later(r, s->conn); /* ours (not auto-freed), whatever the outcome */
    bool failed = s->failed || up == NULL || s->status == 0;
    if (failed) {
        r->m.upstream_errors++;
        r->w[s->worker].n_errors++;
        router_worker_failed(r, s->worker);
    }
    side_unaccount(s);
    prefill_side_done_fn done = s->done;
    void *ctx = s->ctx;
    int status = s->status;
    free(s);
    done(ctx, status, failed);
}

prefill_side *prefill_side_start(router *r, int32_t worker, const prefill_side_args *a, prefill_side_done_fn done,
                                 void *ctx) {
    router_worker *w = &r->w[worker];
    prefill_side *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    *s = (prefill_side){.r = r, .worker = worker, .cost = a->cost, .done = done, .ctx = ctx};
    s->conn = evhttp_connection_base_new(r->base, NULL, w->host, (unsigned short)w->port);
    s->req = s->conn ? evhttp_request_new(on_side_done, s) : NULL;
    if (!s->req) {
        if (s->conn) evhttp_connection_free(s->conn);
        free(s);
        return NULL;
    }
    evhttp_connection_set_timeout(s->conn, (int)(r->cfg->upstream_timeout_s + 0.5)); /* freed after the callback */
    evhttp_request_set_header_cb(s->req, on_side_header);
    evhttp_request_set_error_cb(s->req, on_side_error);
    struct evkeyvalq *out = evhttp_request_get_output_headers(s->req);
    for (const struct evkeyval *h = a->headers ? a->headers->tqh_first : NULL; h; h = h->next.tqe_next)
        if (!a->is_hop(h->key)) evhttp_add_header(out, h->key, h->value);
    char host[256];
    snprintf(host, sizeof host, "%s:%d", w->host, w->port);
    evhttp_add_header(out, "Host", host);
    evhttp_add_header(out, "Connection", "close");
    evhttp_add_header(out, "X-Cinfer-Handoff-Id", a->handoff_id);
    evhttp_add_header(out, "X-Cinfer-Handoff-To", a->decode_url);
    if (a->body_len) evbuffer_add(evhttp_request_get_output_buffer(s->req), a->body, a->body_len);
    w->decisions[a->policy]++;
    w->n_requests++;
    w->inflight++;
    w->inflight_cost += s->cost;
    if (evhttp_make_request(s->conn, s->req, a->cmd, a->uri)) { /* frees req */
        evhttp_connection_free(s->conn);
        side_unaccount(s);
        free(s);
        return NULL;
    }
    return s;
}

void prefill_side_cancel(prefill_side *s) {
    if (!s) return;
    evhttp_request_set_error_cb(s->req, NULL);
    evhttp_cancel_request(s->req); /* frees it, no callback */
    router_free_conn_later(s->r, s->conn);
    side_unaccount(s);
    free(s);
}

/* A sent abort notice: its connection is the router's, freed after the callback. */
typedef struct abort_notice {
    router *r;
    struct evhttp_connection *conn;
} abort_notice;

static void on_abort_sent(struct evhttp_request *req, void *arg) {
    (void)req;
    abort_notice *a = arg;
    router_free_conn_later(a->r, a->conn);
    free(a);
}

void router_handoff_abort(router *r, int32_t decode_worker, const char *handoff_id, const char *auth) {
    router_worker *w = &r->w[decode_worker];
    abort_notice *a = malloc(sizeof *a);
    struct evhttp_connection *c =
        a ? evhttp_connection_base_new(r->base, NULL, w->host, (unsigned short)w->port) : NULL;
    struct evhttp_request *req = c ? evhttp_request_new(on_abort_sent, a) : NULL;
    if (!req) {
        if (c) evhttp_connection_free(c);
        free(a);
        return;
    }
    *a = (abort_notice){.r = r, .conn = c};
    evhttp_connection_set_timeout(c, (int)(r->cfg->upstream_timeout_s + 0.5));
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    char host[256];
    snprintf(host, sizeof host, "%s:%d", w->host, w->port);
    evhttp_add_header(out, "Host", host);
    evhttp_add_header(out, "Connection", "close");
    evhttp_add_header(out, "Content-Length", "0");
    evhttp_add_header(out, "X-Cinfer-Handoff-Id", handoff_id);
    if (auth) evhttp_add_header(out, "Authorization", auth);
    if (evhttp_make_request(c, req, EVHTTP_REQ_POST, "/handoff/abort")) { /* nothing was called back */
        evhttp_connection_free(c);
        free(a);
        LOG_DEBUG("router: handoff %s: abort notice not sent", handoff_id);
    }
}
