/* conn_guard.c - connection timeouts, the connection limit and accept
 * back-off for `cinfer serve` (see conn_guard.h for the rules).
 *
 * Records (gconn) live in one array, owned by the guard; each holds one
 * reference on its connection's bufferevent, released when the record is
 * dropped. A record is dropped when its bufferevent's event callback is NULL
 * (evhttp freed the connection) - checked on every accept, every sweep
 * (SWEEP_MS) and before it is used for a request. A record starts "new" and
 * is confirmed by the kick event that runs right after the accept callback
 * (by then evhttp has set the callbacks of a connection it kept). */
#include "serve/conn_guard.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"

#define SWEEP_MS 200
#define REFUSED_GRACE_S 2.0
#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 1000

typedef enum { G_HEADERS, G_BODY, G_IDLE, G_BUSY, G_REFUSED, G_DYING } gphase;

typedef struct gconn {
    conn_guard *g;
    struct bufferevent *bev; /* our reference */
    struct evbuffer_cb_entry *cbe;
    gphase phase;
    bool confirmed; /* evhttp kept the connection (seen with callbacks set) */
    bool line_text; /* the current header line has a character */
    bool any_line; /* a non-empty header line was seen */
    double phase_start;
} gconn;

struct conn_guard {
    struct event_base *base;
    const serve_config *cfg;
    struct evconnlistener *lev;
    struct event *ev_sweep, *ev_kick, *ev_resume;
    gconn **v;
    size_t n, cap;
    int backoff_ms;
    conn_guard_stats st;
    metrics *m; /* borrowed, may be NULL: mirrors st (sync_metrics) */
};

static void sync_metrics(conn_guard *g) {
    if (!g->m) return;
    g->m->connections_open = (int64_t)g->n;
    g->m->connections_refused = g->st.refused;
    g->m->connection_timeouts = g->st.timeouts;
    g->m->accept_pauses = g->st.accept_pauses;
}

/* ---- records ---- */

static bool conn_dead(const gconn *c) {
    bufferevent_event_cb ecb;
    bufferevent_getcb(c->bev, NULL, NULL, &ecb, NULL);
    return ecb == NULL;
}

/* evhttp is reading a request from it (not generating, not writing). */
static bool conn_reading(const gconn *c) {
    bufferevent_data_cb rcb;
    bufferevent_getcb(c->bev, &rcb, NULL, NULL, NULL);
    return rcb != NULL && (bufferevent_get_enabled(c->bev) & EV_READ);
}

static void drop_at(conn_guard *g, size_t i) {
    gconn *c = g->v[i];
    if (c->cbe) evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->cbe);
    bufferevent_decref(c->bev);
    free(c);
    g->v[i] = g->v[--g->n];
}

static void reap(conn_guard *g) {
    for (size_t i = 0; i < g->n;)
        if (g->v[i]->confirmed && conn_dead(g->v[i])) drop_at(g, i);
        else i++;
}

/* Makes evhttp drop the connection: a read timeout in a reading phase frees
 * it without a response (libevent: evhttp_connection_incoming_fail). */
static void conn_kill(gconn *c, const char *why) {
    static const struct timeval now_tv = {0, 1000};
    if (c->phase == G_DYING) return;
    if (why) {
        c->g->st.timeouts++;
        LOG_DEBUG("connection closed: %s timeout", why);
    }
    c->phase = G_DYING;
    if (bufferevent_set_timeouts(c->bev, &now_tv, NULL)) LOG_WARN("connection guard: cannot set a timeout");
}

static void start_phase(gconn *c, gphase p, double now) {
    c->phase = p;
    c->phase_start = now;
    if (p == G_HEADERS || p == G_IDLE) c->line_text = c->any_line = false;
}

/* Feeds header bytes to the blank-line detector; true at the end of the headers. */
static bool header_bytes(gconn *c, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\r') continue;
        if (p[i] != '\n') {
            c->line_text = true;
            continue;
        }
        if (!c->line_text && c->any_line) return true;
        c->any_line |= c->line_text;
        c->line_text = false;
    }
    return false;
}

/* Scans the `added` bytes just appended to buf for the blank line that ends
 * the headers (16 buffer chunks at a time). */
static void scan_headers(gconn *c, struct evbuffer *buf, size_t added, double now) {
    size_t len = evbuffer_get_length(buf);
    struct evbuffer_ptr pos;
    if (added > len || evbuffer_ptr_set(buf, &pos, len - added, EVBUFFER_PTR_SET)) return;
    while (added > 0) {
        struct evbuffer_iovec vec[16];
        int nv = evbuffer_peek(buf, (ev_ssize_t)added, &pos, vec, 16);
        size_t done = 0;
        for (int k = 0; k < nv && k < 16 && done < added; k++) {
            size_t n = vec[k].iov_len < added - done ? vec[k].iov_len : added - done;
            if (header_bytes(c, vec[k].iov_base, n)) {
                start_phase(c, G_BODY, now);
                return;
            }
            done += n;
        }
        if (nv <= 0 || done == 0 || evbuffer_ptr_set(buf, &pos, done, EVBUFFER_PTR_ADD)) return;
        added -= done;
    }
}

static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    gconn *c = arg;
    if (!info->n_added) return;
    double now = time_now();
    if (c->phase == G_BUSY && conn_reading(c)) start_phase(c, G_HEADERS, now); /* next request on a keep-alive */
    else if (c->phase == G_IDLE) start_phase(c, G_HEADERS, now);
    if (c->phase == G_HEADERS) scan_headers(c, buf, info->n_added, now);
}

/* ---- periodic check ---- */

static double phase_limit(const conn_guard *g, const gconn *c) {
    switch (c->phase) {
    case G_HEADERS: return g->cfg->header_timeout_s;
    case G_BODY: return g->cfg->body_timeout_s;
    case G_IDLE: return g->cfg->idle_timeout_s;
    case G_REFUSED: return REFUSED_GRACE_S;
    default: return 0;
    }
}

static const char *const phase_names[] = {"header", "body", "idle", "busy", "refused", "dying"};

static void check_conn(conn_guard *g, gconn *c, double now) {
    if (c->phase == G_DYING) return;
    bool reading = conn_reading(c);
    if (c->phase == G_BUSY) {
        if (!reading) return;
        start_phase(c, evbuffer_get_length(bufferevent_get_input(c->bev)) ? G_HEADERS : G_IDLE, now);
    }
    double lim = phase_limit(g, c);
    if (reading && lim > 0 && now - c->phase_start >= lim) conn_kill(c, phase_names[c->phase]);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg) {
    conn_guard *g = arg;
    (void)fd;
    (void)what;
    reap(g);
    double now = time_now();
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i]->confirmed) check_conn(g, g->v[i], now);
    sync_metrics(g);
    cf_log_flush_suppressed();
}

/* Right after accept callbacks: confirm new records (or drop those evhttp
 * already gave up) and close connections beyond twice the limit. */
static void on_kick(evutil_socket_t fd, short what, void *arg) {
    conn_guard *g = arg;
    (void)fd;
    (void)what;
    for (size_t i = 0; i < g->n;) {
        gconn *c = g->v[i];
        if (!c->confirmed && conn_dead(c)) {
            drop_at(g, i);
            continue;
        }
        c->confirmed = true;
        i++;
    }
    int64_t hard = 2 * (int64_t)g->cfg->max_connections;
    for (size_t i = 0; g->cfg->max_connections > 0 && i < g->n && (int64_t)g->n > hard; i++)
        if (g->v[i]->phase == G_REFUSED && conn_reading(g->v[i])) conn_kill(g->v[i], NULL);
    sync_metrics(g);
}

/* ---- accept ---- */

static struct bufferevent *on_new_conn(struct event_base *base, void *arg) {
    conn_guard *g = arg;
    g->backoff_ms = 0; /* an accept succeeded */
    reap(g);
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        gconn **v = realloc(g->v, cap * sizeof *v);
        if (!v) {
            LOG_WARN("connection guard: out of memory (connection not tracked)");
            return NULL; /* evhttp makes its own bufferevent */
        }
        g->v = v;
        g->cap = cap;
    }
    gconn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    /* no BEV_OPT_CLOSE_ON_FREE: evhttp then closes the socket itself when it
     * frees the connection, so our reference never keeps a socket open */
    if (!(c->bev = bufferevent_socket_new(base, -1, 0))) {
        free(c);
        return NULL;
    }
    bufferevent_incref(c->bev);
    c->g = g;
    if (!(c->cbe = evbuffer_add_cb(bufferevent_get_input(c->bev), on_input, c)))
        LOG_WARN("connection guard: cannot watch a connection's input");
    bool over = g->cfg->max_connections > 0 && (int64_t)g->n >= g->cfg->max_connections;
    start_phase(c, over ? G_REFUSED : G_HEADERS, time_now());
    if (over) g->st.refused++;
    g->v[g->n++] = c;
    event_active(g->ev_kick, EV_TIMEOUT, 1);
    return c->bev;
}

static void on_resume(evutil_socket_t fd, short what, void *arg) {
    conn_guard *g = arg;
    (void)fd;
    (void)what;
    if (g->lev && evconnlistener_enable(g->lev)) LOG_WARN("cannot resume accepting connections");
}

/* The listener's callback argument is evhttp's, so the error callback finds
 * its guard here: the one guard whose listener is being watched (a process
 * runs one server; conn_guard_listen / conn_guard_unlisten set and clear it). */
static conn_guard *listening_guard;

static void on_accept_error(struct evconnlistener *lev, void *arg) {
    conn_guard *g = listening_guard;
    int err = EVUTIL_SOCKET_ERROR();
    (void)arg;
    if (!g || g->lev != lev) {
        LOG_WARN("accept() failed: %s", strerror(err));
        return;
    }
    g->backoff_ms = g->backoff_ms ? g->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (g->backoff_ms > BACKOFF_MAX_MS) g->backoff_ms = BACKOFF_MAX_MS;
    g->st.accept_pauses++;
    sync_metrics(g);
    LOG_WARN("accept() failed: %s (%d connections open); pausing new connections for %d ms", strerror(err), (int)g->n,
             g->backoff_ms);
    struct timeval tv = {g->backoff_ms / 1000, (g->backoff_ms % 1000) * 1000};
    if (evconnlistener_disable(lev) || evtimer_add(g->ev_resume, &tv))
        LOG_WARN("cannot pause the listener after an accept error");
}

/* ---- libevent's log ---- */

static void on_libevent_log(int severity, const char *msg) {
    cf_log_lvl lvl = severity >= EVENT_LOG_ERR    ? CF_LOG_ERROR
                     : severity == EVENT_LOG_WARN ? CF_LOG_WARN
                     : severity == EVENT_LOG_MSG  ? CF_LOG_INFO
                                                  : CF_LOG_DEBUG;
    cf_log(lvl, "libevent: %s", msg);
}

/* ---- API ---- */

conn_guard *conn_guard_new(struct event_base *base, struct evhttp *http, const serve_config *cfg, metrics *m) {
    conn_guard *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->m = m;
    g->base = base;
    g->cfg = cfg;
    g->ev_sweep = event_new(base, -1, EV_PERSIST, on_sweep, g);
    g->ev_kick = event_new(base, -1, 0, on_kick, g);
    g->ev_resume = evtimer_new(base, on_resume, g);
    struct timeval tv = {0, SWEEP_MS * 1000};
    if (!g->ev_sweep || !g->ev_kick || !g->ev_resume || event_add(g->ev_sweep, &tv)) {
        conn_guard_free(g);
        return NULL;
    }
    event_set_log_callback(on_libevent_log);
    evhttp_set_bevcb(http, on_new_conn, g);
    return g;
}

int conn_guard_listen(conn_guard *g, struct evhttp_bound_socket *bound) {
    g->lev = evhttp_bound_socket_get_listener(bound);
    if (!g->lev) return -1;
    listening_guard = g;
    evconnlistener_set_error_cb(g->lev, on_accept_error);
    return 0;
}

void conn_guard_unlisten(conn_guard *g) {
    if (!g) return;
    if (g->ev_resume) evtimer_del(g->ev_resume);
    if (listening_guard == g) listening_guard = NULL;
    g->lev = NULL;
}

static void refuse(conn_guard *g, struct evhttp_request *req) {
    static const char body[] = "{\"error\":{\"message\":\"Too many connections: this server accepts at most %d at "
                               "once; retry later.\",\"type\":\"server_error\",\"param\":null,\"code\":"
                               "\"too_many_connections\"}}";
    struct evbuffer *b = evbuffer_new();
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (!b || evbuffer_add_printf(b, body, (int)g->cfg->max_connections) < 0) {
        if (b) evbuffer_free(b);
        evhttp_send_error(req, 503, NULL);
        return;
    }
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "Retry-After", "1");
    evhttp_add_header(h, "Connection", "close");
    evhttp_send_reply(req, 503, "Service Unavailable", b);
    evbuffer_free(b);
    LOG_INFO("request refused: %d connections open, limit %d", (int)g->n, (int)g->cfg->max_connections);
}

bool conn_guard_request(conn_guard *g, struct evhttp_request *req) {
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    for (size_t i = 0; bev && i < g->n; i++) {
        gconn *c = g->v[i];
        if (c->bev != bev) continue;
        c->confirmed = true;
        if (c->phase == G_REFUSED) {
            c->phase = G_DYING; /* evhttp closes it after the reply */
            refuse(g, req);
            return true;
        }
        if (c->phase == G_DYING && bufferevent_set_timeouts(c->bev, NULL, NULL)) /* completed in time after all */
            LOG_WARN("connection guard: cannot clear a timeout");
        c->phase = G_BUSY;
        return false;
    }
    return false;
}

conn_guard_stats conn_guard_get_stats(const conn_guard *g) {
    conn_guard_stats s = g->st;
    s.open = (int64_t)g->n;
    return s;
}

void conn_guard_free(conn_guard *g) {
    if (!g) return;
    if (g->st.refused || g->st.timeouts || g->st.accept_pauses)
        LOG_INFO("connections: %llu refused (--max-connections), %llu closed by timeouts, %llu accept pauses",
                 (unsigned long long)g->st.refused, (unsigned long long)g->st.timeouts,
                 (unsigned long long)g->st.accept_pauses);
    if (listening_guard == g) listening_guard = NULL;
    while (g->n) drop_at(g, g->n - 1);
    free(g->v);
    if (g->ev_sweep) event_free(g->ev_sweep);
    if (g->ev_kick) event_free(g->ev_kick);
    if (g->ev_resume) event_free(g->ev_resume);
    event_set_log_callback(NULL);
    free(g);
}
