/* server_internal.h - the server's state (server.c) shared with
 * server_handoff.c, the glue between the HTTP server and the prefill/decode
 * handoff (serve/handoff.h). Loop thread only. */
#ifndef CINFER_SERVE_SERVER_INTERNAL_H
#define CINFER_SERVE_SERVER_INTERNAL_H

#include <event2/event.h>
#include <event2/http.h>

#include "serve/api.h"
#include "serve/conn_guard.h"
#include "serve/handoff.h"
#include "serve/metrics.h"
#include "serve/prep.h"
#include "serve/response_store.h"
#include "serve/server.h"

typedef struct server server;

typedef struct sv_job {
    server *s;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct sv_job *prev, *next;
    gen_job g;
    char id[48];
    char path[32];
    double t_arrival, t_first;
    double *t_last; /* per choice: time of its latest token */
    bool stream, paused;
    bool stream_ids; /* X-Cinfer-Stream-Ids (a router): `: cinfer` comments for cinfer.resume (serve/resume.h) */
    recipe_api api; /* the API's error shape */
    api_job a; /* the recipe path (a.active): Chat, Messages, Responses */
    int32_t n_choices; /* reserved in inflight_choices at admission */
    const char *model; /* echoed in responses: the served name the request used (cfg->names) */
    /* prompt preparation on a worker (prep.c): from admission until prep_done */
    prep_task task;
    gen_params prep_p; /* moved into g by gen_job_prepare */
    serve_error prep_err;
    int prep_rc;
    bool gone; /* the client went away while its prompt was being prepared */
    handoff_req hreq; /* prefill/decode handoff headers (server_handoff.c) */
    handoff_push *push; /* step 1 on this prefill worker: the push of its blocks, or NULL */
    bool hand_waited; /* step 2: the wait for the handoff is over */
} sv_job;

struct server {
    const serve_config *cfg;
    const gen_model *gm;
    struct {
        int32_t n_vocab, max_n;
    } lim; /* token ids below n_vocab; n at most max_n */
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct event *ev_engine, *ev_sigterm, *ev_sigint, *ev_peek, *ev_deadline;
    struct evbuffer *out; /* reused to assemble a pump's SSE events; handed to evhttp (emptied) each time */
    sv_job *jobs; /* active list */
    int64_t inflight_choices;
    int64_t n_flushing; /* finished responses evhttp is still writing (shutdown waits for them) */
    metrics m;
    conn_guard *guard; /* timeouts, --max-connections, accept back-off (conn_guard.h) */
    bool draining;
    long long started;
    response_store *store; /* Responses API (previous_response_id, GET/DELETE) */
    prep_pool *prep; /* prompt workers (template + tokenizer off the loop) */
    struct event *ev_prep;
    int64_t n_preparing; /* admitted requests whose prompt is being prepared (or waiting for a handoff) */
    handoff_mgr *hand; /* prefill/decode roles and the KV handoff (handoff.h) */
    bool closing; /* the loop has ended: nothing more is answered */
    json_t *model_extra; /* /v1/models fields beyond OpenAI's: {"sampling_defaults": {...}} (owned) */
};

/* server.c, for server_handoff.c */
void sv_send_json(server *s, struct evhttp_request *req, int status, char *json);
/* Ends a finished non-streaming job with this body (taken) and frees it. */
void sv_job_reply(sv_job *j, int status, char *json);
/* The prepared job continues (submit), e.g. after its handoff wait. */
void sv_prep_done(sv_job *j);
/* Exits the loop when draining and nothing is left in flight. */
void sv_maybe_exit(server *s);

/* server_shutdown.c: the SIGTERM / SIGINT handler (a libevent signal callback; arg: the server). */
void sv_on_signal(evutil_socket_t sig, short what, void *arg);

/* server_handoff.c */
/* GET /handoff/info (after authorization): true when path was it (answered). */
bool sv_hand_route(server *s, struct evhttp_request *req, const char *path, bool get, const char *id, double t0);
/* handle_generate, after the body was parsed: reads the headers (-1 with a 400) and makes a step-1
 * request a prefill-only run. */
int sv_hand_admit(server *s, struct evhttp_request *req, handoff_req *h, gen_params *p, serve_error *e);
/* prep_done, first thing: true when the job now waits for its handoff (sv_prep_done runs later). */
bool sv_hand_park(sv_job *j);
/* Before gen_job_submit: the decode side claims its records, the prefill side starts its push. */
int sv_hand_attach(sv_job *j, serve_error *e);
/* job_complete, first thing: true when the handoff answers this job (later, sv_job_reply). */
bool sv_hand_complete(sv_job *j);
/* job_free / job_drop: the push continues without the job. */
void sv_hand_detach(sv_job *j);

#endif
