/* router.c - `cinfer router`'s server: the evhttp front, its own endpoints
 * (/health, /ready, /metrics, /workers), dispatch of API paths to
 * router_proxy.c, the probe timer, and the drain on SIGTERM/SIGINT (new
 * requests get 503, in-flight ones finish until shutdown_timeout_s, then
 * they are cut and the loop exits). */
#include "cluster/router.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "cluster/router_internal.h"

static void send_body(struct evhttp_request *req, int status, const char *ctype, char *body, size_t len) {
    struct evbuffer *b = evbuffer_new();
    if (!b || !body) {
        free(body);
        if (b) evbuffer_free(b);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evbuffer_add(b, body, len);
    free(body);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    evhttp_send_reply(req, status, NULL, b);
    evbuffer_free(b);
}

static void send_json(struct evhttp_request *req, int status, char *json) {
    send_body(req, status, "application/json", json, json ? strlen(json) : 0);
}

static bool is_api_path(const char *path) {
    static const char *const exact[] = {
        "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
        "/v1/responses",        "/v1/models",      "/tokenize",    "/detokenize"};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (!strcmp(path, exact[i])) return true;
    return (!strncmp(path, "/v1/models/", 11) && path[11]) || (!strncmp(path, "/v1/responses/", 14) && path[14]);
}

static bool any_healthy(const router *r) {
    for (int32_t i = 0; i < r->n_w; i++)
        if (r->w[i].view.healthy && r->w[i].view.accepting) return true;
    return false;
}

static void on_request(struct evhttp_request *req, void *arg) {
    router *r = arg;
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    if (!path) path = "";
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    bool get = cmd == EVHTTP_REQ_GET;
    if (!strcmp(path, "/health") && get) {
        send_json(req, 200, strdup("{\"status\":\"ok\"}"));
        return;
    }
    if (!strcmp(path, "/ready") && get) {
        bool ok = !r->draining && any_healthy(r);
        send_json(req, ok ? 200 : 503, strdup(ok ? "{\"status\":\"ready\"}" : "{\"status\":\"not ready\"}"));
        return;
    }
    if (!strcmp(path, "/metrics") && get) {
        size_t len = 0;
        char *txt = router_metrics_render(r, &len);
        send_body(req, 200, "text/plain; version=0.0.4; charset=utf-8", txt, len);
        return;
    }
    if (!strcmp(path, "/workers") && get) {
        send_json(req, 200, router_workers_json(r));
        return;
    }
    if (!is_api_path(path)) {
        send_json(req, 404,
                  strdup("{\"error\":{\"message\":\"no such route on the router\",\"type\":"
                         "\"invalid_request_error\",\"param\":null,\"code\":\"not_found\"}}"));
        return;
    }
    if (r->draining) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        send_json(req, 503,
                  strdup(!strncmp(path, "/v1/messages", 12)
                             ? "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
                               "\"the router is shutting down\"}}"
                             : "{\"error\":{\"message\":\"the router is shutting down\",\"type\":"
                               "\"server_error\",\"param\":null,\"code\":\"shutting_down\"}}"));
        return;
    }
    router_proxy_start(r, req, path);
}

void router_request_done(router *r) {
    if (r->draining && r->active == 0 && r->n_flushing <= 0) event_base_loopexit(r->base, NULL);
}

static void free_conn_cb(evutil_socket_t fd, short ev, void *arg) {
    (void)fd, (void)ev;
    evhttp_connection_free(arg);
}

void router_free_conn_later(router *r, struct evhttp_connection *c) {
    struct timeval now = {0, 0};
    if (c && event_base_once(r->base, -1, EV_TIMEOUT, free_conn_cb, c, &now))
        LOG_WARN("router: cannot schedule freeing a failed connection");
}

static void on_health_timer(evutil_socket_t fd, short ev, void *arg) {
    (void)fd, (void)ev;
    router_workers_poll(arg);
}

static void on_drain_deadline(evutil_socket_t fd, short ev, void *arg) {
    (void)fd, (void)ev;
    router *r = arg;
    LOG_WARN("router: drain deadline passed with %d request(s) in flight; cutting them", r->active);
    router_proxy_cancel_all(r);
    event_base_loopexit(r->base, NULL);
}

static void on_signal(evutil_socket_t sig, short ev, void *arg) {
    (void)ev;
    router *r = arg;
    if (r->draining) return;
    r->draining = true;
    LOG_INFO("router: signal %d: draining %d request(s) in flight (up to %.0f s)", (int)sig, r->active,
             r->cfg->shutdown_timeout_s);
    if (r->active == 0 && r->n_flushing <= 0) {
        event_base_loopexit(r->base, NULL);
        return;
    }
    struct timeval tv = {.tv_sec = (time_t)r->cfg->shutdown_timeout_s,
                         .tv_usec =
                             (suseconds_t)((r->cfg->shutdown_timeout_s - (time_t)r->cfg->shutdown_timeout_s) * 1e6)};
    r->drain_timer = evtimer_new(r->base, on_drain_deadline, r);
    if (r->drain_timer) evtimer_add(r->drain_timer, &tv);
}

static int bound_port(struct evhttp_bound_socket *bs) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl)) return -1;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

static void router_teardown(router *r) {
    if (r->health_timer) event_free(r->health_timer);
    if (r->sig_term) event_free(r->sig_term);
    if (r->sig_int) event_free(r->sig_int);
    if (r->drain_timer) event_free(r->drain_timer);
    if (r->http) evhttp_free(r->http);
    router_workers_free(r);
    if (r->scratch_buf) evbuffer_free(r->scratch_buf);
    free(r->resp_owner);
    if (r->base) event_base_free(r->base);
}

int router_run(const router_config *cfg, cf_err *err) {
    router r = {.cfg = cfg, .tokens_per_byte = 0.25};
    int rc = -1;
    signal(SIGPIPE, SIG_IGN);
    if (!(r.base = event_base_new()) || !(r.http = evhttp_new(r.base)) || !(r.scratch_buf = evbuffer_new())) {
        cf_fail(err, "out of memory");
        goto out;
    }
    if (router_workers_init(&r, err)) goto out;
    if (!(r.resp_owner = calloc(ROUTER_RESP_SLOTS, sizeof *r.resp_owner))) {
        cf_fail(err, "out of memory");
        goto out;
    }
    evhttp_set_max_body_size(r.http, (ev_ssize_t)cfg->max_body);
    evhttp_set_allowed_methods(r.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD);
    evhttp_set_gencb(r.http, on_request, &r);
    struct evhttp_bound_socket *bs = cfg->listen_fd > 0
                                         ? evhttp_accept_socket_with_handle(r.http, cfg->listen_fd)
                                         : evhttp_bind_socket_with_handle(r.http, cfg->host, (ev_uint16_t)cfg->port);
    if (!bs) {
        cf_fail(err, "cannot listen on %s:%d (in use, or a bad address)", cfg->host, cfg->port);
        goto out;
    }
    struct timeval tv = {.tv_sec = (time_t)cfg->health_interval_s,
                         .tv_usec = (suseconds_t)((cfg->health_interval_s - (time_t)cfg->health_interval_s) * 1e6)};
    r.health_timer = event_new(r.base, -1, EV_PERSIST, on_health_timer, &r);
    r.sig_term = evsignal_new(r.base, SIGTERM, on_signal, &r);
    r.sig_int = evsignal_new(r.base, SIGINT, on_signal, &r);
    if (!r.health_timer || !r.sig_term || !r.sig_int || event_add(r.health_timer, &tv) || event_add(r.sig_term, NULL) ||
        event_add(r.sig_int, NULL)) {
        cf_fail(err, "cannot set up timers and signals");
        goto out;
    }
    router_workers_poll(&r); /* know the workers' state before the first request */
    fprintf(stderr, "cinfer router: listening on http://%s:%d (%d workers, policy %s)\n", cfg->host, bound_port(bs),
            r.n_w, route_policy_name(cfg->policy));
    fflush(stderr);
    event_base_dispatch(r.base);
    LOG_INFO("router: stopped");
    rc = 0;
out:
    router_teardown(&r);
    return rc;
}
