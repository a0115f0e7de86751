/* server.c - the HTTP side of `cinfer serve` (see server.h, docs/serve.md).
 *
 * Threads: everything here runs on one libevent loop thread, except the
 * prompt work (template + tokenizer: prep.c workers, see prep_run / util_run);
 * the engine runs on its own thread. The loop watches cinfer_engine_fd() (an eventfd); when
 * it fires, cinfer_engine_ready() lists the engine requests with new output
 * and each is read without blocking, formatted (recipe, through api_output.c /
 * one parser per choice) and written.
 *
 * Request lifetime (sv_job): created when a generation request passes
 * validation and its engine requests are submitted; on the active list until
 * (a) every choice finished and the response was handed to evhttp, or (b) the
 * client went away (connection close callback), which releases the engine
 * requests still running (the engine frees their KV blocks before its next
 * forward pass). A job is freed in exactly one of those two places.
 *
 * Disconnects are noticed three ways: evhttp's close callback after a failed
 * write; a MSG_PEEK on the socket before each delivery of output; and a 25 ms
 * timer that peeks every waiting job's socket (a non-streaming or queued
 * request writes nothing until it ends). A peek that sees EOF frees the
 * connection, which runs the close callback.
 *
 * Backpressure: a streaming connection's kernel send buffer is set to
 * cfg.conn_buffer (SO_SNDBUF; Linux doubles it), and after each write the
 * bytes still in its libevent output buffer are checked: above
 * cfg.conn_buffer the job is paused: its engine output is not read (it
 * queues inside the engine) until evhttp reports the buffer flushed, then
 * everything pending is read at once. One slow client therefore holds about
 * 3 x conn_buffer bytes of socket buffers (plus one batch of chunks) and
 * never delays other requests.
 *
 * libevent detail: when evhttp itself fails a connection whose reply we have
 * not finished, it detaches the request (evcon == NULL) and leaves freeing it
 * to us; when we free the connection, evhttp frees the request. */
#include "serve/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/log.h"
#include "base/randid.h"
#include "base/timeutil.h"
#include "serve/api.h"
#include "serve/conn_guard.h"
#include "serve/listen.h"
#include "serve/metrics.h"
#include "serve/prep.h"
#include "serve/resume.h"
#include "serve/routes.h"
#include "serve/server_internal.h"
#include "serve/tenant.h"

/* ---- small helpers ---- */

#define make_id(s, prefix, out, cap) ((void)(s), cf_random_id_or_die(prefix, out, cap)) /* CSPRNG ids */

/* Sends `body` (taken: freed here) with a status; NULL body -> 500. */
static void send_text(server *s, struct evhttp_request *req, int status, const char *ctype, char *body, size_t len) {
    struct evbuffer *b = evbuffer_new();
    if (!b || !body) {
        free(body);
        if (b) evbuffer_free(b);
        evhttp_send_error(req, 500, NULL);
        metrics_request_done(&s->m, 500);
        return;
    }
    if (evhttp_request_get_command(req) != EVHTTP_REQ_HEAD) evbuffer_add(b, body, len); /* evhttp 2.1 sends it */
    free(body);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", ctype);
    evhttp_send_reply(req, status, NULL, b);
    evbuffer_free(b);
    metrics_request_done(&s->m, status);
}

static void send_json(server *s, struct evhttp_request *req, int status, char *json) {
    send_text(s, req, status, "application/json", json, json ? strlen(json) : 0);
}

void sv_send_json(server *s, struct evhttp_request *req, int status, char *json) { send_json(s, req, status, json); }

static void send_error_api(server *s, struct evhttp_request *req, const serve_error *e, const char *id, double t0,
                           recipe_api api) {
    if (e->status == 429 || e->status == 503)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
    int status;
    char *body = api_error_json(api, e, id, &status);
    if (api == RECIPE_API_MESSAGES) evhttp_add_header(evhttp_request_get_output_headers(req), "request-id", id);
    send_json(s, req, status, body);
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    char note[600];
    snprintf(note, sizeof note, "error=\"%s\"", e->message);
    http_log_request(id, http_method_name(req), path ? path : "?", status, NULL, 0, time_now() - t0, note);
}

static void send_error(server *s, struct evhttp_request *req, const serve_error *e, const char *id, double t0) {
    send_error_api(s, req, e, id, t0, RECIPE_API_CHAT);
}

/* ---- job list ---- */

static void job_link(server *s, sv_job *j) {
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
}

static void job_unlink(server *s, sv_job *j) {
    if (j->prev) j->prev->next = j->next;
    else s->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    j->prev = j->next = NULL;
}

static void maybe_exit(server *s);
void sv_maybe_exit(server *s) { maybe_exit(s); }

static void maybe_exit(server *s) {
    if (s->draining && !s->jobs && s->n_flushing == 0 && s->n_preparing == 0) event_base_loopexit(s->base, NULL);
}

/* A finished generation response is written out by evhttp after we hand it
 * over; shutdown waits for that (or for the connection to fail). Exactly one
 * of these two callbacks runs per tracked response. */
static void on_flush_failed(struct evhttp_connection *evcon, void *arg) {
    server *s = arg;
    (void)evcon;
    s->n_flushing--;
    maybe_exit(s);
}

static void on_flushed(struct evhttp_request *req, void *arg) {
    server *s = arg;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon) evhttp_connection_set_closecb(evcon, NULL, NULL);
    s->n_flushing--;
    maybe_exit(s);
}

static void job_free(sv_job *j) {
    server *s = j->s;
    sv_hand_detach(j);
    job_unlink(s, j);
    s->inflight_choices -= j->n_choices;
    s->m.inflight--;
    gen_job_free(&j->g, s->gm);
    api_job_free(&j->a);
    free(j->t_last);
    free(j);
    maybe_exit(s);
}

static void job_account(sv_job *j) {
    metrics *m = &j->s->m;
    m->prompt_tokens += (uint64_t)j->g.usage.prompt_tokens;
    m->generation_tokens += (uint64_t)j->g.usage.completion_tokens;
    m->cached_tokens += (uint64_t)j->g.usage.cached_tokens;
    metrics_observe(&m->e2e, time_now() - j->t_arrival, 1);
}

static const char *job_finish_note(const sv_job *j, char *buf, size_t cap) {
    size_t at = (size_t)snprintf(buf, cap, "finish=");
    for (int32_t i = 0; i < j->g.p.n && at < cap; i++) {
        const char *f = gen_finish_name(j->g.choices[i].finish);
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? "," : "", f ? f : "none");
    }
    return buf;
}

/* Client gone: the connection is being freed. */
static void on_conn_close(struct evhttp_connection *evcon, void *arg) {
    sv_job *j = arg;
    server *s = j->s;
    (void)evcon;
    int running = 0;
    for (int32_t i = 0; i < j->g.p.n; i++) running += j->g.choices[i].id != 0;
    s->m.disconnected++;
    if (running) s->m.cancelled++;
    metrics_request_done(&s->m, 499);
    char note[128];
    snprintf(note, sizeof note, "client disconnected, %d choice(s) cancelled", running);
    http_log_request(j->id, "POST", j->path, 499, &j->g, j->t_first > 0 ? j->t_first - j->t_arrival : 0,
                     time_now() - j->t_arrival, note);
    bool detached = evhttp_request_get_connection(j->req) == NULL;
    LOG_DEBUG("request %s: connection closed (%s)", j->id, detached ? "evhttp detached the request" : "freed by us");
    if (detached) evhttp_request_free(j->req);
    j->req = NULL;
    job_free(j); /* releases the running engine requests */
}

/* ---- output delivery ---- */

static void on_drained(struct evhttp_connection *evcon, void *arg);

static void job_done_log(sv_job *j, int status);

/* Ends a job whose choices all finished. */
static void job_complete(sv_job *j) {
    server *s = j->s;
    if (sv_hand_complete(j)) return; /* a prefill-only run: the handoff answers it */
    const char *err = NULL;
    bool cancelled = false;
    for (int32_t i = 0; i < j->g.p.n; i++) {
        if (j->g.choices[i].finish == CINFER_FINISH_ERROR)
            err = j->g.choices[i].error[0] ? j->g.choices[i].error : "engine error";
        cancelled |= j->g.choices[i].finish == CINFER_FINISH_CANCELLED;
    }
    if (cancelled) s->m.cancelled++; /* the shutdown deadline */
    evhttp_connection_set_closecb(j->evcon, on_flush_failed, s);
    evhttp_request_set_on_complete_cb(j->req, on_flushed, s);
    s->n_flushing++;
    int status = 200;
    if (j->stream) { /* the encoder wrote the closing events with the finish */
        if (j->a.store && !j->a.multi) {
            char *body = api_job_response(&j->a, &j->g, j->model);
            api_ctx ctx = {.store = s->store, .now = time_now()};
            api_job_save(&j->a, &ctx, &j->g, body);
            free(body);
        }
        evhttp_send_reply_end(j->req);
        metrics_request_done(&s->m, 200);
    } else if (err) {
        serve_error e;
        serve_fail(&e, 500, "server_error", NULL, NULL, "generation failed: %s", err);
        send_json(s, j->req, 500, api_error_json(j->api, &e, j->id, &status));
    } else if (j->a.multi) {
        send_json(s, j->req, 200, api_multi_response(&j->a, &j->g, j->model, s->gm->tok));
    } else {
        char *body = api_job_response(&j->a, &j->g, j->model);
        api_ctx ctx = {.store = s->store, .now = time_now()};
        api_job_save(&j->a, &ctx, &j->g, body);
        send_json(s, j->req, 200, body);
    }
    job_done_log(j, status);
}

void sv_job_reply(sv_job *j, int status, char *json) {
    server *s = j->s;
    evhttp_connection_set_closecb(j->evcon, on_flush_failed, s);
    evhttp_request_set_on_complete_cb(j->req, on_flushed, s);
    s->n_flushing++;
    send_json(s, j->req, status, json);
    job_done_log(j, status);
}

/* The response was handed to evhttp: account, log, free. */
static void job_done_log(sv_job *j, int status) {
    j->req = NULL;
    job_account(j);
    char note[256];
    http_log_request(j->id, "POST", j->path, status, &j->g, j->t_first > 0 ? j->t_first - j->t_arrival : 0,
                     time_now() - j->t_arrival, job_finish_note(j, note, sizeof note));
    job_free(j);
}

/* Reads choice c's pending output and delivers it. Returns -1 when the job
 * was freed (completed or client gone), else 0. */
static int job_pump(sv_job *j, int32_t c) {
    server *s = j->s;
    if (http_peer_closed(j->evcon)) {
        evhttp_connection_free(j->evcon); /* runs on_conn_close, which frees j */
        return -1;
    }
    int r = gen_job_read(&j->g, s->gm, c, true);
    if (r <= 0 && !gen_job_done(&j->g)) return 0;
    double now = time_now();
    int32_t k = j->g.new_tokens;
    if (r > 0 && j->t_first == 0) { /* first output of any choice (a token, or an immediate finish) */
        j->t_first = now;
        metrics_observe(&s->m.ttft, now - j->t_arrival, 1);
    }
    if (k > 0) { /* tokens that arrive together share the gap since the previous read */
        if (j->t_last[c] > 0) metrics_observe(&s->m.itl, (now - j->t_last[c]) / k, (uint64_t)k);
        j->t_last[c] = now;
    }
    if (j->stream && r > 0) {
        struct evbuffer *b = s->out;
        gen_choice *ch = &j->g.choices[c];
        /* recipe: parser(s) -> stream encoder (finish, usage, [DONE] and errors included) */
        if (api_stream_delta(&j->a, &j->g, c, s->gm->tok))
            gen_job_cancel(&j->g, s->gm); /* out of memory: the stream ends with an error at the finish */
        if (ch->finish != CINFER_FINISH_NONE && api_stream_finish(&j->a, &j->g, c))
            LOG_WARN("request %s: out of memory while writing the stream's end", j->id);
        evbuffer_add(b, j->a.out.data, j->a.out.len);
        j->a.out.len = 0;
        if (j->stream_ids && resume_comment(b, &j->g, j->a.id, j->a.created, false)) gen_job_cancel(&j->g, s->gm);
        if (evbuffer_get_length(b)) evhttp_send_reply_chunk_with_cb(j->req, b, on_drained, j);
        evbuffer_drain(b, evbuffer_get_length(b)); /* empty already unless evhttp refused it */
    }
    if (gen_job_done(&j->g)) {
        job_complete(j);
        return -1;
    }
    if (j->stream && http_conn_unsent(j->evcon) > s->cfg->conn_buffer) {
        j->paused = true;
        s->m.stream_pauses++;
        LOG_DEBUG("request %s: client not reading (%zu bytes unsent), stream paused", j->id,
                  http_conn_unsent(j->evcon));
    }
    return 0;
}

/* Reads every running choice of j. Returns -1 when j was freed. */
static int job_pump_all(sv_job *j) {
    for (int32_t c = 0; c < j->g.p.n && !j->paused; c++)
        if (j->g.choices[c].id && job_pump(j, c) < 0) return -1;
    return 0;
}

static void on_drained(struct evhttp_connection *evcon, void *arg) {
    sv_job *j = arg;
    (void)evcon;
    if (!j->paused) return;
    j->paused = false;
    job_pump_all(j);
}

static void on_engine(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    (void)fd;
    (void)what;
    uint64_t ids[256];
    int n;
    do {
        n = cinfer_engine_ready(s->gm->engine, ids, 256);
        for (int i = 0; i < n; i++) {
            for (sv_job *j = s->jobs; j; j = j->next) {
                int32_t c = gen_job_find(&j->g, ids[i]);
                if (c < 0) continue;
                if (!j->paused) job_pump(j, c);
                break;
            }
        }
    } while (n == 256);
}

static void on_peek(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    (void)fd;
    (void)what;
    sv_job *next;
    for (sv_job *j = s->jobs; j; j = next) {
        next = j->next;
        if (http_peer_closed(j->evcon)) evhttp_connection_free(j->evcon);
    }
}

/* ---- endpoints ---- */

static int check_model(server *s, const char *model, serve_error *e) {
    return route_check_model(s->cfg->names, model, e);
}

static int request_traffic_class(server *s, struct evhttp_request *req, int field, int *cls, serve_error *e);

static api_ctx make_api_ctx(server *s) {
    api_ctx c = {.parser = s->cfg->parser,
                 .store = s->store,
                 .now = time_now(),
                 .max_n = s->lim.max_n,
                 .n_vocab = s->lim.n_vocab,
                 .tok = s->gm->tok,
                 .has_think_default = s->cfg->has_reasoning_budget_default,
                 .think_default = s->cfg->reasoning_budget_default,
                 .defaults = &s->gm->defaults};
    for (int32_t i = 0; c.parser == RECIPE_PARSER_MISTRAL && i < s->gm->n_special && !c.mistral_args; i++)
        c.mistral_args = !strcmp(s->gm->special[i], "[ARGS]");
    return c;
}

/* Chat (api CHAT), Completions (kind GEN_COMPLETION), Messages, Responses. */
static void fail_generate(server *s, struct evhttp_request *req, const serve_error *e, const char *id, double t0,
                          api_job *a, recipe_api api) {
    api_job_free(a);
    send_error_api(s, req, e, id, t0, api);
}

static void on_prep_close(struct evhttp_connection *evcon, void *arg);
static void prep_run(prep_task *t);
static void util_run(prep_task *t);
static void util_done(prep_task *t);
static void job_started(sv_job *j);

/* Parses and admits a generation request; its prompt is then prepared on a worker (prep_run)
 * and the job continues in prep_done. */
static void handle_generate(server *s, struct evhttp_request *req, gen_kind kind, recipe_api api, const char *path,
                            const char *body, size_t len, double t0) {
    serve_error e = {0};
    gen_params p;
    api_job a = {0};
    char id[48];
    make_id(s,
            kind == GEN_COMPLETION        ? "cmpl-"
            : api == RECIPE_API_MESSAGES  ? "msg_"
            : api == RECIPE_API_RESPONSES ? "resp_"
                                          : "chatcmpl-",
            id, sizeof id);
    snprintf(a.id, sizeof a.id, "%s", id);
    a.created = (int64_t)time(NULL);
    int trc = tenant_of_request(s->cfg, req, a.tenant);
    api_ctx actx = make_api_ctx(s);
    int rc = kind == GEN_COMPLETION ? api_completion_parse(&a, body, len, &actx, &p, &e)
                                    : api_job_parse(&a, api, body, len, &actx, &p, &e);
    if (!rc && kind == GEN_CHAT && api_job_prepare(&a, &actx, &p, &e)) {
        gen_params_free(&p);
        rc = -1;
    }
    if (rc) {
        fail_generate(s, req, &e, id, t0, &a, api);
        return;
    }
    resume_adopt_id(&p, a.id, sizeof a.id, &a.created, &a.seed);
    if (check_model(s, p.model, &e) || request_traffic_class(s, req, p.traffic_class, &p.traffic_class, &e) ||
        ((trc || tenant_cache_salt(a.tenant, s->cfg->share_prefix_cache, &p.cache_salt)) &&
         serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory"))) {
        gen_params_free(&p);
        fail_generate(s, req, &e, id, t0, &a, api);
        return;
    }
    handoff_req hr;
    if (sv_hand_admit(s, req, &hr, &p, &e)) {
        gen_params_free(&p);
        fail_generate(s, req, &e, id, t0, &a, api);
        return;
    }
    if (p.n > s->cfg->max_inflight) {
        serve_bad(&e, "n", "'n' is %d but this server runs at most %d choices at once (--max-seqs + --max-queue)", p.n,
                  s->cfg->max_inflight);
        gen_params_free(&p);
        fail_generate(s, req, &e, id, t0, &a, api);
        return;
    }
    if (s->inflight_choices + p.n > s->cfg->max_inflight) {
        serve_fail(&e, 429, "rate_limit_exceeded", "rate_limit_exceeded", NULL,
                   "The server is busy (%lld requests in flight, limit %d); retry later.",
                   (long long)s->inflight_choices, s->cfg->max_inflight);
        gen_params_free(&p);
        fail_generate(s, req, &e, id, t0, &a, api);
        return;
    }
    sv_job *j = calloc(1, sizeof *j);
    double *tl = calloc((size_t)p.n, sizeof *tl);
    if (!j || !tl) {
        free(j);
        free(tl);
        gen_params_free(&p);
        serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        fail_generate(s, req, &e, id, t0, &a, api);
        return;
    }
    j->s = s;
    j->req = req;
    j->api = api;
    j->evcon = evhttp_request_get_connection(req);
    j->t_arrival = t0;
    j->t_last = tl;
    j->stream = p.stream;
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->path, sizeof j->path, "%s", path);
    j->n_choices = p.n;
    j->hreq = hr;
    j->stream_ids =
        p.stream && p.n == 1 && evhttp_find_header(evhttp_request_get_input_headers(req), "X-Cinfer-Stream-Ids");
    j->model = serve_names_pick(s->cfg->names, p.model);
    j->a = a; /* moved: freed with the job */
    j->prep_p = p; /* moved: into j->g by gen_job_prepare */
    if (j->prep_p.req) j->prep_p.req = &j->a.req; /* the request moved with the api_job */
    s->inflight_choices += j->n_choices; /* admitted: counts against --max-seqs + --max-queue from now on */
    s->m.inflight++;
    s->n_preparing++;
    evhttp_connection_set_closecb(j->evcon, on_prep_close, j);
    j->task.run = prep_run;
    prep_submit(s->prep, &j->task); /* continues in prep_done, on this loop */
}

/* Ends an admitted job that never started (its prompt failed, the client left, or shutdown):
 * the reservation is returned and everything freed, engine requests included. */
static void job_drop(sv_job *j) {
    server *s = j->s;
    sv_hand_detach(j);
    s->inflight_choices -= j->n_choices;
    s->m.inflight--;
    gen_job_free(&j->g, s->gm);
    gen_params_free(&j->prep_p);
    api_job_free(&j->a);
    free(j->t_last);
    free(j);
    maybe_exit(s);
}

/* Back on the loop with a prepared prompt: submit, then the response starts (stream headers and
 * role chunks) and output flows through job_pump. */
static void prep_done(sv_job *j) {
    server *s = j->s;
    serve_error e = {0};
    if (sv_hand_park(j)) return; /* waits for its handoff; back here through sv_prep_done */
    s->n_preparing--;
    if (j->gone) { /* on_prep_close already answered for it (499) */
        job_drop(j);
        return;
    }
    evhttp_connection_set_closecb(j->evcon, NULL, NULL);
    if (!j->task.ran) serve_fail(&e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
    else if (j->prep_rc) e = j->prep_err;
    else if (!sv_hand_attach(j, &e) && !gen_job_submit(&j->g, s->gm, &e)) {
        if (!j->a.completion) api_job_prompt_check(&j->a, &j->g, s->gm->tok);
        if (!(j->a.active && j->stream && api_stream_begin(&j->a, &j->g, j->model))) {
            job_started(j);
            return;
        }
        serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
    }
    send_error_api(s, j->req, &e, j->id, j->t_arrival, j->api);
    job_drop(j); /* releases the engine requests a failed begin left running */
}

void sv_prep_done(sv_job *j) { prep_done(j); }

static void job_started(sv_job *j) {
    server *s = j->s;
    struct evhttp_request *req = j->req;
    job_link(s, j);
    evhttp_connection_set_closecb(j->evcon, on_conn_close, j);
    if (j->stream) {
        /* bound the kernel's share of an unread stream too (it autotunes up to MBs) */
        struct bufferevent *bev = evhttp_connection_get_bufferevent(j->evcon);
        int fd = bev ? (int)bufferevent_getfd(bev) : -1, sndbuf = (int)s->cfg->conn_buffer;
        if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf))
            LOG_DEBUG("request %s: SO_SNDBUF: %s", j->id, strerror(errno));
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_add_header(h, "Cache-Control", "no-cache");
        evhttp_add_header(h, "X-Request-Id", j->id);
        if (j->api == RECIPE_API_MESSAGES) evhttp_add_header(h, "request-id", j->id);
        if (j->stream_ids) evhttp_add_header(h, "X-Cinfer-Resumable", "1");
        evhttp_send_reply_start(req, 200, "OK");
        if (j->a.out.len || j->stream_ids) { /* opening events (+ forced calls' first deltas) from api_stream_begin */
            struct evbuffer *b = evbuffer_new();
            if (b) {
                evbuffer_add(b, j->a.out.data, j->a.out.len);
                j->a.out.len = 0;
                if (j->stream_ids) resume_comment(b, &j->g, j->a.id, j->a.created, true);
                evhttp_send_reply_chunk_with_cb(req, b, on_drained, j);
                evbuffer_free(b);
            }
        }
    } else {
        evhttp_add_header(evhttp_request_get_output_headers(req), "X-Request-Id", j->id);
        if (j->api == RECIPE_API_MESSAGES)
            evhttp_add_header(evhttp_request_get_output_headers(req), "request-id", j->id);
    }
}

/* ---- prompt workers (prep.c) ---- */

static void prep_run(prep_task *t) { /* a worker thread: reads only the model (immutable) */
    sv_job *j = (sv_job *)((char *)t - offsetof(sv_job, task));
    j->prep_rc = gen_job_prepare(&j->g, j->s->gm, &j->prep_p, &j->prep_err);
}

/* A task back from the workers: a generation prompt (prep_done) or a small endpoint (util_done). */
static void finish_task(prep_task *t) {
    if (t->run == util_run) util_done(t);
    else prep_done((sv_job *)((char *)t - offsetof(sv_job, task)));
}

static void on_prep(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    (void)fd;
    (void)what;
    prep_task *t;
    while ((t = prep_take_done(s->prep))) finish_task(t);
}

/* The client went away while its prompt was being prepared: answered (499) now, dropped when the
 * worker hands the job back (prep_done). */
static void on_prep_close(struct evhttp_connection *evcon, void *arg) {
    sv_job *j = arg;
    (void)evcon;
    j->s->m.disconnected++;
    metrics_request_done(&j->s->m, 499);
    http_log_request(j->id, "POST", j->path, 499, NULL, 0, time_now() - j->t_arrival,
                     "client disconnected while its prompt was prepared");
    if (evhttp_request_get_connection(j->req) == NULL) evhttp_request_free(j->req);
    j->req = NULL;
    j->gone = true;
}

/* POST /tokenize, /detokenize, /v1/messages/count_tokens: the answer (routes.c: template and
 * tokenizer) is computed on a prompt worker like a generation prompt, then sent from the loop. */
typedef struct util_task {
    prep_task task;
    server *s;
    struct evhttp_request *req;
    route_kind k;
    route_ctx rc;
    char *body, *out;
    size_t len;
    serve_error e;
    int rc_run;
    bool gone;
    char id[48];
    double t0;
} util_task;

static void util_run(prep_task *t) { /* a worker thread: reads the body copy and the model only */
    util_task *u = (util_task *)((char *)t - offsetof(util_task, task));
    u->rc_run = route_run(&u->rc, u->k, u->body, u->len, &u->out, &u->e);
}

static void on_util_close(struct evhttp_connection *evcon, void *arg) {
    util_task *u = arg;
    (void)evcon;
    metrics_request_done(&u->s->m, 499);
    if (evhttp_request_get_connection(u->req) == NULL) evhttp_request_free(u->req);
    u->req = NULL;
    u->gone = true;
}

static void util_done(prep_task *t) {
    static const char *const paths[] = {"/tokenize", "/detokenize", "/v1/messages/count_tokens"};
    util_task *u = (util_task *)((char *)t - offsetof(util_task, task));
    server *s = u->s;
    s->n_preparing--;
    if (!u->gone) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(u->req), NULL, NULL);
        if (!u->task.ran) serve_fail(&u->e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        if (!u->task.ran || u->rc_run) {
            send_error_api(s, u->req, &u->e, u->id, u->t0,
                           u->k == ROUTE_COUNT_TOKENS ? RECIPE_API_MESSAGES : RECIPE_API_CHAT);
        } else {
            if (u->k == ROUTE_COUNT_TOKENS)
                evhttp_add_header(evhttp_request_get_output_headers(u->req), "request-id", u->id);
            send_json(s, u->req, 200, u->out); /* takes out */
            u->out = NULL;
            http_log_request(u->id, "POST", paths[u->k], 200, NULL, 0, time_now() - u->t0, NULL);
        }
    }
    free(u->out);
    free(u->body);
    free(u);
    maybe_exit(s);
}

static void handle_util(server *s, struct evhttp_request *req, route_kind k, const char *body, size_t len, double t0) {
    static const char *const pre[] = {"tok-", "detok-", "req_"};
    util_task *u = calloc(1, sizeof *u);
    char *copy = malloc(len + 1); /* the request (and its body) may go away while a worker reads it */
    if (!u || !copy) {
        free(u);
        free(copy);
        serve_error e;
        serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        send_error_api(s, req, &e, "-", t0, k == ROUTE_COUNT_TOKENS ? RECIPE_API_MESSAGES : RECIPE_API_CHAT);
        return;
    }
    memcpy(copy, body, len);
    copy[len] = 0;
    *u = (util_task){.s = s,
                     .req = req,
                     .k = k,
                     .body = copy,
                     .len = len,
                     .t0 = t0,
                     .rc = {.gm = s->gm, .names = s->cfg->names, .actx = make_api_ctx(s)}};
    make_id(s, pre[k], u->id, sizeof u->id);
    s->n_preparing++;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_util_close, u);
    u->task.run = util_run;
    prep_submit(s->prep, &u->task); /* continues in util_done */
}

/* GET / DELETE /v1/responses/{id} */
static void handle_stored_response(server *s, struct evhttp_request *req, const char *rid, bool del, double t0) {
    serve_error e = {0};
    char id[48];
    make_id(s, "req-", id, sizeof id);
    const char *body = NULL;
    char tenant[TENANT_ID_CAP];
    if (tenant_of_request(s->cfg, req, tenant) || !rstore_get(s->store, rid, tenant, time_now(), NULL, &body)) {
        serve_fail(&e, 404, "invalid_request_error", "not_found", "response_id", "No response found with id '%.100s'.",
                   rid);
        send_error_api(s, req, &e, id, t0, RECIPE_API_RESPONSES);
        return;
    }
    if (!del) {
        send_json(s, req, 200, strdup(body));
        return;
    }
    rstore_delete(s->store, rid, tenant);
    json_t *o = json_pack("{s:s, s:s, s:b}", "id", rid, "object", "response", "deleted", 1);
    send_json(s, req, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
    if (o) json_decref(o);
}

static bool authorized(server *s, struct evhttp_request *req) {
    int cls;
    return http_authorized(s->cfg->api_key, s->cfg->keys, req, &cls);
}

/* The traffic class a generation request runs with (serve/traffic.h):
 * `field` (cinfer.traffic_class from the body, TRAFFIC_UNSET if absent), else
 * the X-Cinfer-Traffic-Class header, else the API key's class. Any route that
 * submits to the engine calls this after parsing. */
static int request_traffic_class(server *s, struct evhttp_request *req, int field, int *cls, serve_error *e) {
    int header, key_cls;
    if (traffic_class_from_header(evhttp_find_header(evhttp_request_get_input_headers(req), TRAFFIC_HEADER), &header,
                                  e))
        return -1;
    http_authorized(s->cfg->api_key, s->cfg->keys, req, &key_cls);
    *cls = traffic_class_resolve(field, header, key_cls);
    return 0;
}

/* GET /load: what a router needs to place requests (docs/router.md "Load"). */
static char *load_json(const server *s) {
    cinfer_engine_stats st = cinfer_engine_get_stats(s->gm->engine);
    char *out = NULL;
    int64_t bt = s->cfg->kv_block_tokens > 0 ? s->cfg->kv_block_tokens : 16;
    if (asprintf(&out,
                 "{\"running\":%d,\"waiting\":%d,\"inflight\":%lld,\"max_inflight\":%d,\"max_seqs\":%d,"
                 "\"kv_tokens\":%lld,\"kv_capacity_tokens\":%lld,\"kv_block_tokens\":%lld,\"draining\":%s}",
                 st.running, st.waiting, (long long)s->inflight_choices, s->cfg->max_inflight, s->cfg->max_seqs,
                 (long long)st.kv_blocks_used * bt, (long long)st.kv_blocks_total * bt, (long long)bt,
                 s->draining ? "true" : "false") < 0)
        return NULL;
    return out;
}

static void on_request(struct evhttp_request *req, void *arg) {
    server *s = arg;
    if (conn_guard_request(s->guard, req)) return; /* refused: over --max-connections */
    double t0 = time_now();
    serve_error e = {0};
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    if (!path) path = "";
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    bool get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD, post = cmd == EVHTTP_REQ_POST;
    char id[48];
    make_id(s, "req-", id, sizeof id);
    recipe_api api = RECIPE_API_CHAT; /* the error shape; set by the routing below */
    struct evkeyvalq *ih = evhttp_request_get_input_headers(req); /* evhttp leaves a TRACE/HEAD body unread: */
    if ((cmd == EVHTTP_REQ_TRACE || cmd == EVHTTP_REQ_HEAD) &&
        (evhttp_find_header(ih, "Content-Length") || evhttp_find_header(ih, "Transfer-Encoding")))
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close"); /* not a next request */

    if (!strcmp(path, "/health")) {
        if (!get) goto bad_method;
        send_json(s, req, 200, strdup("{\"status\":\"ok\"}"));
        return;
    }
    if (!strcmp(path, "/ready")) {
        if (!get) goto bad_method;
        if (s->draining) {
            serve_fail(&e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
            send_error(s, req, &e, id, t0);
        } else send_json(s, req, 200, strdup("{\"status\":\"ready\"}"));
        return;
    }
    if (!strcmp(path, "/load")) { /* the router's load probe (docs/router.md) */
        if (!get) goto bad_method;
        send_json(s, req, 200, load_json(s));
        return;
    }
    if (!strcmp(path, "/metrics")) {
        if (!get) goto bad_method;
        cinfer_engine_stats st = cinfer_engine_get_stats(s->gm->engine);
        char *txt;
        size_t len;
        if (metrics_render(&s->m, &st, s->gm->engine, &txt, &len)) txt = NULL, len = 0;
        if (txt && s->hand) metrics_append(&s->m, &txt, &len, handoff_metrics, s->hand);
        if (txt && s->cfg->extra_metrics)
            metrics_append(&s->m, &txt, &len, s->cfg->extra_metrics, s->cfg->extra_metrics_ctx);
        send_text(s, req, 200, "text/plain; version=0.0.4; charset=utf-8", txt, len);
        return;
    }
    bool gen_chat = !strcmp(path, "/v1/chat/completions"), gen_cmpl = !strcmp(path, "/v1/completions");
    bool tok = !strcmp(path, "/tokenize"), detok = !strcmp(path, "/detokenize"), models = !strcmp(path, "/v1/models");
    bool one_model = !strncmp(path, "/v1/models/", 11) && path[11];
    bool msgs = !strcmp(path, "/v1/messages"), count = !strcmp(path, "/v1/messages/count_tokens");
    bool resp = !strcmp(path, "/v1/responses"), one_resp = !strncmp(path, "/v1/responses/", 14) && path[14];
    api = msgs || count || !strncmp(path, "/v1/messages/", 13) ? RECIPE_API_MESSAGES
          : resp || one_resp                                   ? RECIPE_API_RESPONSES
                                                               : RECIPE_API_CHAT;
    bool hinfo = !strcmp(path, "/handoff/info") || !strcmp(path, "/handoff/abort");
    if (!gen_chat && !gen_cmpl && !tok && !detok && !models && !one_model && !msgs && !count && !resp && !one_resp &&
        !hinfo) {
        serve_fail(&e, 404, "invalid_request_error", "not_found", NULL, "no route for %.100s %.200s",
                   http_method_name(req), path);
        send_error_api(s, req, &e, id, t0, api);
        return;
    }
    if (!authorized(s, req)) {
        serve_fail(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                   "Incorrect or missing API key: send 'Authorization: Bearer <key>' (or 'x-api-key: <key>').");
        send_error_api(s, req, &e, id, t0, api);
        return;
    }
    if (sv_hand_route(s, req, path, get, id, t0)) return;
    if (one_resp) {
        if (!get && cmd != EVHTTP_REQ_DELETE) goto bad_method;
        bool cut;
        char *rid = http_path_id(path + 14, &cut);
        if (rid && cut) { /* "/v1/responses/resp_x%00y" must not name resp_x */
            serve_fail(&e, 404, "invalid_request_error", "not_found", "response_id",
                       "No response found with id '%.100s' (the id contains an encoded NUL byte).", rid);
            send_error_api(s, req, &e, id, t0, RECIPE_API_RESPONSES);
        } else if (rid) handle_stored_response(s, req, rid, cmd == EVHTTP_REQ_DELETE, t0);
        else evhttp_send_error(req, 500, NULL);
        free(rid);
        return;
    }
    if (models) {
        if (!get) goto bad_method;
        send_json(s, req, 200, serve_names_models_json(s->cfg->names, s->started, s->model_extra));
        return;
    }
    if (one_model) {
        if (!get) goto bad_method;
        bool cut;
        char *name = http_path_id(path + 11, &cut);
        if (name && cut)
            serve_fail(&e, 404, "invalid_request_error", "model_not_found", "model",
                       "The model '%.200s' does not exist (the id contains an encoded NUL byte).", name);
        if (!name || cut || check_model(s, name, &e)) {
            free(name);
            if (!e.status) serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
            send_error(s, req, &e, id, t0);
            return;
        }
        send_json(s, req, 200,
                  route_models_json(serve_names_pick(s->cfg->names, name), s->started, true, s->model_extra));
        free(name);
        return;
    }
    if (!post) goto bad_method;
    if (s->draining) {
        serve_fail(&e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        send_error_api(s, req, &e, id, t0, api);
        return;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    if (len > s->cfg->max_body) {
        serve_fail(&e, 413, "invalid_request_error", "request_too_large", NULL,
                   "The request body has %zu bytes; the limit is %zu.", len, s->cfg->max_body);
        send_error_api(s, req, &e, id, t0, api);
        return;
    }
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    if (!body) {
        serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        send_error_api(s, req, &e, id, t0, api);
        return;
    }
    if (gen_chat || gen_cmpl || msgs || resp)
        handle_generate(s, req, gen_cmpl ? GEN_COMPLETION : GEN_CHAT, api, path, body, len, t0);
    else handle_util(s, req, count ? ROUTE_COUNT_TOKENS : tok ? ROUTE_TOKENIZE : ROUTE_DETOKENIZE, body, len, t0);
    return;
bad_method:
    serve_fail(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%s is not allowed on %.200s",
               http_method_name(req), path);
    send_error_api(s, req, &e, id, t0, api);
}

/* ---- run ---- */

int serve_run(const serve_config *cfg, const gen_model *gm, cf_err *err) {
    server sv;
    memset(&sv, 0, sizeof sv);
    server *s = &sv;
    s->cfg = cfg;
    s->gm = gm;
    s->lim.n_vocab = tokenizer_n_vocab(gm->tok);
    s->lim.max_n = cfg->max_n;
    s->started = (long long)time(NULL);
    metrics_init(&s->m);
    s->m.model_name = cfg->model_name;
    signal(SIGPIPE, SIG_IGN);
    /* Freeing the signal events below restores the action they found; make
     * that "ignore", so a second SIGTERM during teardown cannot turn a clean
     * exit into a kill. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    int rc = -1;
    s->base = event_base_new();
    if (!s->base || !(s->http = evhttp_new(s->base)) || !(s->guard = conn_guard_new(s->base, s->http, cfg, &s->m))) {
        cf_fail(err, "cannot create the event loop");
        goto done;
    }
    /* evhttp's own cap (it answers 413 in its own format before reading the
     * body); bodies between max_body and this get our JSON 413. */
    size_t hard = cfg->max_body + (cfg->max_body < (1u << 20) ? (1u << 20) : cfg->max_body);
    evhttp_set_max_body_size(s->http, (ev_ssize_t)hard);
    evhttp_set_max_headers_size(s->http, 64 * 1024);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH |
                                            EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT);
    evhttp_set_gencb(s->http, on_request, s);
    s->bound = cfg->listen_fd > 0 ? evhttp_accept_socket_with_handle(s->http, cfg->listen_fd)
                                  : evhttp_bind_socket_with_handle(s->http, cfg->host, (ev_uint16_t)cfg->port);
    if (!s->bound || conn_guard_listen(s->guard, s->bound)) {
        cf_fail(err, "cannot listen on %s:%d (%s)", cfg->host, cfg->port, strerror(errno));
        goto done;
    }
    int port = serve_socket_port(evhttp_bound_socket_get_fd(s->bound), cfg->port);
    s->out = evbuffer_new();
    if (!(s->store = rstore_new(cfg->response_store_max, cfg->response_store_bytes, cfg->response_store_ttl_s)) ||
        !(s->model_extra = gen_defaults_model_fields(&gm->defaults))) {
        cf_fail(err, "out of memory");
        goto done;
    }
    s->ev_engine = event_new(s->base, cinfer_engine_fd(gm->engine), EV_READ | EV_PERSIST, on_engine, s);
    s->ev_sigterm = evsignal_new(s->base, SIGTERM, sv_on_signal, s);
    s->ev_sigint = evsignal_new(s->base, SIGINT, sv_on_signal, s);
    s->ev_peek = event_new(s->base, -1, EV_PERSIST, on_peek, s);
    if (!(s->prep = prep_pool_new(2)) ||
        !(s->ev_prep = event_new(s->base, prep_pool_fd(s->prep), EV_READ | EV_PERSIST, on_prep, s)) ||
        event_add(s->ev_prep, NULL)) {
        cf_fail(err, "cannot start the prompt workers");
        goto done;
    }
    if (handoff_open(&cfg->handoff, s->base, gm->engine, &s->hand, err)) goto done;
    struct timeval peek_tv = {0, 25000};
    if (!s->out || !s->ev_engine || !s->ev_sigterm || !s->ev_sigint || !s->ev_peek || event_add(s->ev_engine, NULL) ||
        event_add(s->ev_sigterm, NULL) || event_add(s->ev_sigint, NULL) || event_add(s->ev_peek, &peek_tv)) {
        cf_fail(err, "cannot register events");
        goto done;
    }
    fprintf(stderr, "cinfer serve: listening on http://%s:%d (model '%s', context %d)\n", cfg->host, port,
            cfg->model_name, gm->ctx);
    fflush(stderr);
    event_base_dispatch(s->base);
    /* prompts still being prepared: the workers finish the one in hand, the rest never run */
    prep_pool_stop(s->prep);
    for (prep_task *t; (t = prep_take_done(s->prep));) finish_task(t); /* not run: answered 503, freed */
    /* requests still here were cancelled at the deadline and did not end in time */
    while (s->jobs) {
        sv_job *j = s->jobs;
        evhttp_connection_set_closecb(j->evcon, NULL, NULL);
        job_free(j);
    }
    s->closing = true;
    handoff_close(s->hand); /* jobs still waiting for a handoff are answered 503 */
    s->hand = NULL;
    LOG_INFO("shutdown complete");
    rc = 0;
done:
    s->closing = true;
    handoff_close(s->hand);
    if (s->ev_engine) event_free(s->ev_engine);
    if (s->ev_sigterm) event_free(s->ev_sigterm);
    if (s->ev_sigint) event_free(s->ev_sigint);
    if (s->ev_peek) event_free(s->ev_peek);
    if (s->ev_prep) event_free(s->ev_prep);
    if (s->prep) prep_pool_stop(s->prep); /* no-op when stopped above */
    prep_pool_free(s->prep);
    if (s->ev_deadline) event_free(s->ev_deadline);
    if (s->http) evhttp_free(s->http);
    conn_guard_free(s->guard); /* after evhttp (its connections), before the base */
    if (s->out) evbuffer_free(s->out);
    rstore_free(s->store);
    json_decref(s->model_extra);
    if (s->base) event_base_free(s->base);
    return rc;
}
