/* conn_guard.h - per-connection limits for `cinfer serve` that evhttp (libevent
 * 2.1) lacks: header / body / idle timeouts, a connection limit, and accept
 * back-off when file descriptors run out (docs/serve.md "Connections").
 *
 * How it sees connections: evhttp's bufferevent callback (evhttp_set_bevcb)
 * creates every accepted connection's bufferevent here, so the guard learns
 * of each connection before its first byte; it keeps one reference on it
 * (bufferevent_incref) so the pointer stays valid after evhttp frees the
 * connection, which it notices from the bufferevent's callbacks being cleared
 * (evhttp always has its error callback set on a live connection). An input
 * buffer callback watches the request bytes for the end of the headers. The
 * server tells the guard when a request reaches it (conn_guard_request).
 *
 * Phases and deadlines (a connection only ever times out while evhttp is
 * reading a request from it; never while a request is being generated or its
 * response written):
 *   headers: from accept (first request) or from the first byte of a later
 *            request until the blank line ending the headers: header_timeout;
 *   body:    from the end of the headers until the request is complete:
 *            body_timeout;
 *   idle:    a keep-alive connection between requests: idle_timeout.
 * A timed-out connection is closed without a response (evhttp is made to
 * drop it through a 1 ms read timeout). Timeouts of 0 are off.
 *
 * Connection limit: a connection accepted while max_connections others are
 * open is refused: its first request is answered 503 (code
 * "too_many_connections", Retry-After: 1, Connection: close), and it is closed
 * if that request does not arrive within 2 s. Beyond twice the limit new
 * connections are closed at once without a response.
 *
 * Accept errors (EMFILE, ENFILE, ...): the listener is paused for 20 ms,
 * doubling up to 1 s while the errors continue (reset by a successful
 * accept), instead of retrying in a busy loop; the warning is rate limited
 * (base/log.h). libevent's own log messages go through cf_log too.
 *
 * Threads: HTTP loop thread only. Ownership: the guard owns its records, its
 * references on the bufferevents and its events; conn_guard_free must run
 * after evhttp_free and before event_base_free. */
#ifndef CINFER_SERVE_CONN_GUARD_H
#define CINFER_SERVE_CONN_GUARD_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stdint.h>

#include "serve/metrics.h"
#include "serve/server.h"

typedef struct conn_guard conn_guard;

typedef struct conn_guard_stats {
    int64_t open; /* connections open now */
    uint64_t refused; /* refused by --max-connections */
    uint64_t timeouts; /* closed by a header / body / idle timeout */
    uint64_t accept_pauses; /* listener pauses after accept errors */
} conn_guard_stats;

/* Installs the bufferevent callback on `http` and the periodic check; keeps
 * m's connection gauge and counters (borrowed; NULL: none) up to date.
 * NULL when out of memory. */
conn_guard *conn_guard_new(struct event_base *base, struct evhttp *http, const serve_config *cfg, metrics *m);
/* Watches the bound socket's listener for accept errors. 0 or -1. */
int conn_guard_listen(conn_guard *g, struct evhttp_bound_socket *bound);
/* Forgets the listener (call before evhttp_del_accept_socket). */
void conn_guard_unlisten(conn_guard *g);
/* A request arrived (call first thing in the request callback). true when the
 * guard answered it (refused connection: 503 sent); the caller then returns. */
bool conn_guard_request(conn_guard *g, struct evhttp_request *req);
conn_guard_stats conn_guard_get_stats(const conn_guard *g);
void conn_guard_free(conn_guard *g);

#endif
