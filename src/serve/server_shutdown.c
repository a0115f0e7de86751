/* server_shutdown.c - graceful shutdown of `cinfer serve` (docs/serve.md "Shutdown"): the first
 * SIGTERM/SIGINT stops accepting and arms the --shutdown-timeout deadline, in-flight requests
 * finish (the loop exits when the last one is written, server.c maybe_exit); at the deadline the
 * rest are cancelled and the loop stops after a short grace; a second signal stops at once. */
#include <time.h>

#include "base/log.h"
#include "serve/server_internal.h"

static void on_deadline(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    (void)fd;
    (void)what;
    static const struct timeval grace = {2, 0};
    LOG_WARN("shutdown deadline reached: cancelling the requests still in flight");
    for (sv_job *j = s->jobs; j; j = j->next) gen_job_cancel(&j->g, s->gm);
    event_base_loopexit(s->base, &grace); /* cancelled requests end within a step; then stop regardless */
}

void sv_on_signal(evutil_socket_t sig, short what, void *arg) {
    server *s = arg;
    (void)what;
    if (s->draining) {
        LOG_WARN("second signal: stopping now");
        event_base_loopexit(s->base, NULL);
        return;
    }
    s->draining = true;
    int n = 0;
    for (sv_job *j = s->jobs; j; j = j->next) n++;
    LOG_INFO("signal %d: shutting down (stop accepting; %d request(s) in flight; deadline %.1fs)", (int)sig, n,
             s->cfg->shutdown_timeout_s);
    if (s->bound) {
        conn_guard_unlisten(s->guard);
        evhttp_del_accept_socket(s->http, s->bound);
        s->bound = NULL;
    }
    struct timeval tv = {
        (time_t)s->cfg->shutdown_timeout_s,
        (suseconds_t)((s->cfg->shutdown_timeout_s - (double)(time_t)s->cfg->shutdown_timeout_s) * 1e6)};
    s->ev_deadline = evtimer_new(s->base, on_deadline, s);
    if (s->ev_deadline) evtimer_add(s->ev_deadline, &tv);
    sv_maybe_exit(s);
}
