/* runner.c - see runner.h.
 *
 * Ownership: the runner owns one `flight` per request in flight (SSE parser,
 * stream state, error body) and every client connection (kept alive and
 * reused: a finished request returns its connection to the idle stack unless
 * it failed; all are freed when the run ends, never inside a libevent
 * callback); libevent owns the evhttp request (freed after its done callback). Records live
 * in a growing array and flights refer to them by index, never by pointer.
 * Re-entrancy: completions call dispatch(), which may complete a request
 * synchronously when it cannot be sent; the `dispatching` flag keeps that
 * from recursing. */
#include "benchserve/runner.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "benchserve/sse.h"

static const char *const err_names[BS_E_N] = {"connect",      "timeout",    "http_4xx", "http_5xx",
                                              "stream_error", "incomplete", "no_usage"};

const char *bs_err_name(int kind) { return kind >= 0 && kind < BS_E_N ? err_names[kind] : "ok"; }

int bs_endpoint(const char *base_url, const char *suffix, char *host, size_t host_cap, int *port, char *path,
                size_t path_cap, cf_err *err) {
    struct evhttp_uri *u = evhttp_uri_parse(base_url);
    if (!u) return cf_fail(err, "cannot parse URL '%s'", base_url);
    const char *scheme = evhttp_uri_get_scheme(u), *h = evhttp_uri_get_host(u), *p = evhttp_uri_get_path(u);
    int rc = 0;
    if (!scheme || strcmp(scheme, "http") != 0 || !h || !h[0])
        rc = cf_fail(err, "URL '%s': only http://host[:port][/path] is supported", base_url);
    else if (strlen(h) >= host_cap) rc = cf_fail(err, "URL '%s': host too long", base_url);
    if (!rc) {
        snprintf(host, host_cap, "%s", h);
        *port = evhttp_uri_get_port(u) > 0 ? evhttp_uri_get_port(u) : 80;
        char base[512];
        snprintf(base, sizeof base, "%s", p ? p : "");
        size_t n = strlen(base);
        while (n && base[n - 1] == '/') base[--n] = 0;
        int has_v1 = n >= 3 && !strcmp(base + n - 3, "/v1");
        if ((size_t)snprintf(path, path_cap, "%s%s%s", base, has_v1 ? "" : "/v1", suffix) >= path_cap)
            rc = cf_fail(err, "URL '%s': path too long", base_url);
    }
    evhttp_uri_free(u);
    return rc;
}

/* ---- GET /v1/models ---- */

typedef struct fetch {
    bs_buf body;
    int status, done;
    struct event_base *base;
} fetch;

static void fetch_done(struct evhttp_request *req, void *arg) {
    fetch *f = arg;
    f->done = 1;
    event_base_loopexit(f->base, NULL); /* the idle keep-alive connection would keep the loop alive */
    if (!req) return;
    f->status = evhttp_request_get_response_code(req);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n && !bs_buf_append(&f->body, (const char *)evbuffer_pullup(in, -1), n)) evbuffer_drain(in, n);
}

static void add_auth(struct evkeyvalq *h, bs_api api, const char *key) {
    if (!key) return;
    if (api == BS_API_MESSAGES) {
        evhttp_add_header(h, "x-api-key", key);
    } else {
        char v[512];
        snprintf(v, sizeof v, "Bearer %s", key);
        evhttp_add_header(h, "Authorization", v);
    }
}

int bs_fetch_model(const char *base_url, const char *api_key, double timeout_s, char *out, size_t cap, cf_err *err) {
    char host[256], path[600];
    int port;
    if (bs_endpoint(base_url, "/models", host, sizeof host, &port, path, sizeof path, err)) return -1;
    struct event_base *base = event_base_new();
    struct evhttp_connection *c = base ? evhttp_connection_base_new(base, NULL, host, (unsigned short)port) : NULL;
    fetch f = {.base = base};
    struct evhttp_request *req = c ? evhttp_request_new(fetch_done, &f) : NULL;
    int rc = 0;
    if (!req) {
        rc = cf_fail(err, "cannot create an HTTP client");
    } else {
        evhttp_connection_set_timeout(c, (int)(timeout_s + 1));
        evhttp_add_header(evhttp_request_get_output_headers(req), "Host", host);
        add_auth(evhttp_request_get_output_headers(req), BS_API_CHAT, api_key);
        if (evhttp_make_request(c, req, EVHTTP_REQ_GET, path)) rc = cf_fail(err, "cannot send GET %s", path);
        else event_base_dispatch(base);
    }
    if (!rc && f.status != 200)
        rc = cf_fail(err, "GET %s on %s:%d: %s %d", path, host, port, f.status ? "HTTP" : "no response", f.status);
    if (!rc) {
        json_t *o = json_loads(bs_buf_str(&f.body), 0, NULL);
        const char *id = json_string_value(json_object_get(json_array_get(json_object_get(o, "data"), 0), "id"));
        if (!id) rc = cf_fail(err, "GET %s: no model in the list (pass --model)", path);
        else snprintf(out, cap, "%s", id);
        json_decref(o);
    }
    bs_buf_free(&f.body);
    if (c) evhttp_connection_free(c);
    if (base) event_base_free(base);
    return rc;
}

/* ---- the run ---- */

typedef struct heap_item {
    double t;
    size_t session;
} heap_item;

typedef struct runner runner;

typedef struct flight {
    runner *r;
    size_t session, rec;
    struct evhttp_connection *conn;
    bs_sse sse;
    bs_stream st;
    bs_buf errbody;
    double last_tok;
    int err; /* -1 or a transport error kind */
} flight;

struct runner {
    bs_workload *w;
    const bs_run_opts *o;
    bs_run *out;
    struct event_base *base;
    struct event *timer, *tick;
    char host[256], path[600];
    int port;
    heap_item *heap;
    size_t n_heap;
    struct evhttp_connection **conns, **idle; /* every connection; the idle ones */
    size_t n_conns, n_idle, cap_conns;
    long inflight, sent, done, total;
    size_t next_session; /* sessions_at_once: the first session not started yet */
    int stopping, dispatching;
    double t0;
    const char **scratch;
    size_t scratch_cap;
    double last_progress;
    cf_err *err;
    int fatal;
};

static double now(const runner *r) { return time_now() - r->t0; }

static void heap_push(runner *r, double t, size_t s) {
    size_t i = r->n_heap++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (r->heap[p].t <= t) break;
        r->heap[i] = r->heap[p];
        i = p;
    }
    r->heap[i] = (heap_item){t, s};
}

static heap_item heap_pop(runner *r) {
    heap_item top = r->heap[0], last = r->heap[--r->n_heap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= r->n_heap) break;
        if (c + 1 < r->n_heap && r->heap[c + 1].t < r->heap[c].t) c++;
        if (r->heap[c].t >= last.t) break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (r->n_heap) r->heap[i] = last;
    return top;
}

static void progress(runner *r, int final) {
    if (!r->o->progress) return;
    double t = now(r);
    if (!final && t - r->last_progress < 0.1) return;
    r->last_progress = t;
    long errs = 0;
    for (int k = 0; k < BS_E_N; k++) errs += r->out->errors[k];
    int width = 30, fill = r->total ? (int)((double)width * (double)r->done / (double)r->total) : 0;
    if (fill > width) fill = width;
    char bar[64];
    memset(bar, '#', (size_t)fill);
    memset(bar + fill, '-', (size_t)(width - fill));
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %ld/%ld done, %ld in flight, %ld errors, %.1f s", bar, r->done, r->total, r->inflight, errs,
            t);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

static void dispatch(runner *r);

static void note_error(runner *r, bs_record *rec, int kind, const char *msg) {
    rec->error = kind;
    r->out->errors[kind]++;
    if (!r->out->first_error[0])
        snprintf(r->out->first_error, sizeof r->out->first_error, "session %ld turn %ld: %s: %s", rec->session,
                 rec->turn, bs_err_name(kind), msg);
}

/* sessions_at_once: a session ended at time t, the next waiting one starts. */
static void start_waiting_session(runner *r, double t) {
    if (!r->o->sessions_at_once || r->next_session >= r->w->n) return;
    size_t i = r->next_session++;
    heap_push(r, r->w->s[i].arrival > t ? r->w->s[i].arrival : t, i);
}

static void finish(runner *r, flight *f, struct evhttp_request *req) {
    bs_record *rec = &r->out->rec[f->rec];
    rec->end = now(r);
    rec->http_status = req ? evhttp_request_get_response_code(req) : 0;
    rec->prompt_tokens = f->st.prompt_tokens;
    rec->cached_tokens = f->st.cached_tokens;
    rec->replayed_tokens = f->st.replayed_tokens;
    rec->output_tokens = f->st.output_tokens;
    rec->have_usage = f->st.have_usage;
    if (f->err >= 0) note_error(r, rec, f->err, "transport");
    else if (!req || rec->http_status == 0) note_error(r, rec, BS_E_CONNECT, "no response");
    else if (rec->http_status != 200)
        note_error(r, rec, rec->http_status >= 400 && rec->http_status < 500 ? BS_E_HTTP4 : BS_E_HTTP5,
                   bs_buf_str(&f->errbody));
    else if (f->st.failed) note_error(r, rec, BS_E_STREAM, f->st.error);
    else if (!f->st.finished) note_error(r, rec, BS_E_INCOMPLETE, "stream ended without its end event");
    else if (!f->st.have_usage) note_error(r, rec, BS_E_NO_USAGE, "no usage in the stream");
    if (rec->error < 0 || rec->error >= BS_E_HTTP4) r->idle[r->n_idle++] = f->conn;
    bs_session *s = &r->w->s[f->session];
    cf_err e;
    if (rec->error < 0 && s->turn < s->n_turns &&
        !bs_workload_add_answer(r->w, f->session, bs_buf_str(&f->st.text), &e))
        heap_push(r, rec->end + s->think[s->turn], f->session);
    else {
        bs_workload_release(r->w, f->session);
        start_waiting_session(r, rec->end);
    }
    bs_sse_free(&f->sse);
    bs_stream_free(&f->st);
    bs_buf_free(&f->errbody);
    free(f);
    r->inflight--;
    r->done++;
    progress(r, 0);
    dispatch(r);
}

static void push_itl(bs_run *o, double gap) {
    if (o->n_itl == o->cap_itl) {
        size_t cap = o->cap_itl ? o->cap_itl * 2 : 4096;
        double *p = realloc(o->itl, cap * sizeof *p);
        if (!p) return; /* the sample just stays shorter */
        o->itl = p;
        o->cap_itl = cap;
    }
    o->itl[o->n_itl++] = gap;
}

static int on_event(void *arg, const char *event, const char *data, size_t len) {
    flight *f = arg;
    int k = bs_stream_event(&f->st, event, data, len);
    if (k == 1) {
        runner *r = f->r;
        bs_record *rec = &r->out->rec[f->rec];
        double t = now(r);
        if (rec->first < 0) rec->first = t;
        else push_itl(r->out, t - f->last_tok);
        f->last_tok = t;
        rec->token_events++;
    }
    return 0; /* keep reading after an error event: the body still has to end */
}

static void on_chunk(struct evhttp_request *req, void *arg) {
    flight *f = arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    const char *p = (const char *)evbuffer_pullup(in, -1);
    if (evhttp_request_get_response_code(req) == 200) {
        if (bs_sse_feed(&f->sse, p, n, on_event, f) < 0 && !f->st.failed) {
            f->st.failed = 1;
            snprintf(f->st.error, sizeof f->st.error, "out of memory");
        }
    } else if (f->errbody.len < 1024) {
        bs_buf_append(&f->errbody, p, n);
    }
    evbuffer_drain(in, n);
}

static void on_error(enum evhttp_request_error e, void *arg) {
    flight *f = arg;
    f->err = e == EVREQ_HTTP_TIMEOUT ? BS_E_TIMEOUT : BS_E_CONNECT;
}

static void on_done(struct evhttp_request *req, void *arg) {
    flight *f = arg;
    if (req && evhttp_request_get_response_code(req) != 200) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t n = evbuffer_get_length(in);
        if (n && f->errbody.len < 1024) bs_buf_append(&f->errbody, (const char *)evbuffer_pullup(in, -1), n);
    }
    finish(f->r, f, req);
}

static bs_record *new_record(runner *r) {
    bs_run *o = r->out;
    if (o->n_rec == o->cap_rec) {
        size_t cap = o->cap_rec ? o->cap_rec * 2 : 256;
        bs_record *p = realloc(o->rec, cap * sizeof *p);
        if (!p) return NULL;
        o->rec = p;
        o->cap_rec = cap;
    }
    return &o->rec[o->n_rec++];
}

/* An idle keep-alive connection, or a new one (NULL on no memory). */
static struct evhttp_connection *get_conn(runner *r) {
    if (r->n_idle) return r->idle[--r->n_idle];
    if (r->n_conns == r->cap_conns) {
        size_t cap = r->cap_conns ? r->cap_conns * 2 : 64;
        struct evhttp_connection **a = realloc(r->conns, cap * sizeof *a), **b;
        if (!a) return NULL;
        r->conns = a;
        if (!(b = realloc(r->idle, cap * sizeof *b))) return NULL;
        r->idle = b;
        r->cap_conns = cap;
    }
    struct evhttp_connection *c = evhttp_connection_base_new(r->base, NULL, r->host, (unsigned short)r->port);
    if (!c) return NULL;
    evhttp_connection_set_timeout(c, (int)r->o->timeout_s);
    r->conns[r->n_conns++] = c;
    return c;
}

/* Sends the next turn of session `si`, planned at time t. */
static int send_turn(runner *r, size_t si, double planned) {
    bs_session *s = &r->w->s[si];
    if (bs_workload_begin_turn(r->w, si, r->err)) return -1;
    bs_record *rec = new_record(r);
    flight *f = calloc(1, sizeof *f);
    if (!rec || !f) {
        free(f);
        return cf_fail(r->err, "out of memory");
    }
    *rec = (bs_record){.session = (long)si,
                       .turn = s->turn - 1,
                       .trace_line = s->trace_line,
                       .max_tokens = s->max_tokens[s->turn - 1],
                       .planned = planned,
                       .first = -1,
                       .error = -1};
    *f = (flight){.r = r, .session = si, .rec = r->out->n_rec - 1, .err = -1};
    f->st.api = r->o->api;
    bs_prompt p = bs_workload_prompt(r->w, si, &r->scratch, &r->scratch_cap);
    bs_gen_opts g = r->o->gen;
    g.max_tokens = rec->max_tokens;
    bs_buf body = {0};
    struct evhttp_connection *c = NULL;
    struct evhttp_request *req = NULL;
    if (bs_api_body(r->o->api, &p, &g, &body) || !(c = get_conn(r)) || !(req = evhttp_request_new(on_done, f))) {
        bs_buf_free(&body);
        if (c) r->idle[r->n_idle++] = c;
        free(f);
        return cf_fail(r->err, "out of memory building a request");
    }
    f->conn = c;
    evhttp_request_set_chunked_cb(req, on_chunk);
    evhttp_request_set_error_cb(req, on_error);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", r->host);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "Accept", "text/event-stream");
    if (r->o->api == BS_API_MESSAGES) evhttp_add_header(h, "anthropic-version", "2023-06-01");
    add_auth(h, r->o->api, r->o->api_key);
    evbuffer_add(evhttp_request_get_output_buffer(req), body.p, body.len);
    bs_buf_free(&body);
    r->inflight++;
    r->sent++;
    rec->sent = now(r);
    if (evhttp_make_request(c, req, EVHTTP_REQ_POST, r->path)) {
        f->err = BS_E_CONNECT; /* never touch req again (libevent may have freed it); the connection is not reused */
        finish(r, f, NULL);
    }
    return 0;
}

static void dispatch(runner *r) {
    if (r->dispatching || r->fatal) return;
    r->dispatching = 1;
    for (;;) {
        double t = now(r);
        if ((r->o->max_requests && r->sent >= r->o->max_requests) || (r->o->duration > 0 && t >= r->o->duration))
            r->stopping = 1;
        if (r->stopping || !r->n_heap) break;
        if (r->o->concurrency && r->inflight >= r->o->concurrency) break;
        if (r->heap[0].t > t) {
            double d = r->heap[0].t - t;
            struct timeval tv = {.tv_sec = (long)d, .tv_usec = (long)((d - (double)(long)d) * 1e6) + 1};
            evtimer_add(r->timer, &tv);
            break;
        }
        heap_item it = heap_pop(r);
        if (send_turn(r, it.session, it.t)) {
            r->fatal = 1;
            break;
        }
    }
    r->dispatching = 0;
    if (r->fatal || (r->inflight == 0 && (r->stopping || !r->n_heap))) event_base_loopexit(r->base, NULL);
}

static void on_timer(evutil_socket_t fd, short ev, void *arg) {
    (void)fd, (void)ev;
    dispatch(arg);
}

static void on_tick(evutil_socket_t fd, short ev, void *arg) {
    (void)fd, (void)ev;
    runner *r = arg;
    progress(r, 0);
    dispatch(r); /* re-checks --duration while nothing completes */
}

int bs_run_workload(bs_workload *w, const bs_run_opts *o, bs_run *out, cf_err *err) {
    *out = (bs_run){0};
    runner r = {.w = w, .o = o, .out = out, .err = err};
    if (bs_endpoint(o->base_url, bs_api_path(o->api), r.host, sizeof r.host, &r.port, r.path, sizeof r.path, err))
        return -1;
    for (size_t i = 0; i < w->n; i++) r.total += w->s[i].n_turns;
    if (o->max_requests && o->max_requests < r.total) r.total = o->max_requests;
    r.heap = malloc((w->n ? w->n : 1) * sizeof *r.heap);
    r.base = event_base_new();
    r.timer = r.base ? evtimer_new(r.base, on_timer, &r) : NULL;
    r.tick = r.base ? event_new(r.base, -1, EV_PERSIST, on_tick, &r) : NULL;
    int rc = 0;
    if (!r.heap || !r.tick || !r.timer) {
        rc = cf_fail(err, "cannot start the event loop");
    } else {
        r.next_session =
            o->sessions_at_once > 0 && (size_t)o->sessions_at_once < w->n ? (size_t)o->sessions_at_once : w->n;
        for (size_t i = 0; i < r.next_session; i++) heap_push(&r, w->s[i].arrival, i);
        struct timeval tv = {0, 100000};
        evtimer_add(r.tick, &tv);
        r.t0 = time_now();
        dispatch(&r);
        if (r.inflight || (!r.stopping && r.n_heap && !r.fatal)) event_base_dispatch(r.base);
        out->wall_s = now(&r);
        progress(&r, 1);
        if (r.fatal) rc = -1;
    }
    for (size_t i = 0; i < r.n_conns; i++) evhttp_connection_free(r.conns[i]);
    free(r.conns);
    free(r.idle);
    if (r.tick) event_free(r.tick);
    if (r.timer) event_free(r.timer);
    if (r.base) event_base_free(r.base);
    free(r.heap);
    free(r.scratch);
    return rc;
}

void bs_run_free(bs_run *r) {
    free(r->rec);
    free(r->itl);
    *r = (bs_run){0};
}
