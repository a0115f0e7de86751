/* runner.h - drives a workload against an OpenAI-compatible server: one
 * libevent loop, one evhttp client connection per request in flight,
 * streaming bodies parsed as they arrive (evhttp_request_set_chunked_cb).
 *
 * Dispatch: every session's next turn waits in a min-heap keyed by its
 * planned time (arrival for turn 0, previous completion + think time after);
 * a request is sent when its time has come and fewer than `concurrency` are
 * in flight (0 = no limit: open loop). With sessions_at_once N, only N
 * sessions are active at a time: the others wait, in order, and one starts
 * (at its arrival or when a session ends, whichever is later) each time a
 * session ends - a closed loop of N users. The run stops sending after
 * max_requests sends or `duration` seconds and ends when nothing is in
 * flight. Times are seconds from the start of the run (monotonic clock).
 * bs_run owns its records. Callers: cmd_bench_serve.c. */
#ifndef CINFER_BENCHSERVE_RUNNER_H
#define CINFER_BENCHSERVE_RUNNER_H

#include <stddef.h>

#include "base/error.h"
#include "benchserve/api.h"
#include "benchserve/workload.h"

typedef enum {
    BS_E_CONNECT, /* could not connect / connection lost */
    BS_E_TIMEOUT, /* no byte for timeout_s */
    BS_E_HTTP4, /* HTTP 4xx */
    BS_E_HTTP5, /* HTTP 5xx or other non-200 */
    BS_E_STREAM, /* an error event or malformed event in the stream */
    BS_E_INCOMPLETE, /* the body ended before the API's end event */
    BS_E_NO_USAGE, /* finished without usage */
    BS_E_N
} bs_err_kind;

const char *bs_err_name(int kind);

typedef struct bs_run_opts {
    const char *base_url; /* http://host:port[/v1] */
    bs_api api;
    const char *api_key; /* NULL = none */
    bs_gen_opts gen;
    long concurrency; /* 0 = unlimited */
    long sessions_at_once; /* 0 = every session from its arrival */
    long max_requests; /* 0 = every turn of every session */
    double duration; /* 0 = until done */
    double timeout_s;
    int progress; /* progress bar on stderr */
} bs_run_opts;

typedef struct bs_record {
    long session, turn, trace_line;
    long max_tokens;
    double planned, sent, first, end; /* first < 0: no token arrived */
    long prompt_tokens, cached_tokens, replayed_tokens, output_tokens; /* prompt = cached + replayed + computed */
    int have_usage;
    long token_events;
    int error; /* -1 = ok, else bs_err_kind */
    int http_status;
} bs_record;

typedef struct bs_run {
    bs_record *rec;
    size_t n_rec, cap_rec;
    double *itl; /* every gap between token events of a request, seconds */
    size_t n_itl, cap_itl;
    double wall_s; /* start to last completion */
    long errors[BS_E_N];
    char first_error[256];
} bs_run;

/* The server URL of an API endpoint: "/v1" is added unless base ends with it.
 * Fails on a URL that is not http://host[:port][/path]. */
int bs_endpoint(const char *base_url, const char *suffix, char *host, size_t host_cap, int *port, char *path,
                size_t path_cap, cf_err *err);
/* GET <base>/v1/models and copy the first model id. */
int bs_fetch_model(const char *base_url, const char *api_key, double timeout_s, char *out, size_t cap, cf_err *err);

int bs_run_workload(bs_workload *w, const bs_run_opts *o, bs_run *out, cf_err *err);
void bs_run_free(bs_run *r);

#endif
