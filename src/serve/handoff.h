/* handoff.h - the worker side of disaggregated prefill/decode (docs/pd.md):
 * `cinfer serve --role prefill|decode|both`, the KV handoff between a
 * prefill worker P and a decode worker D, and GET /handoff/info.
 *
 * The contract (a router drives it; docs/pd.md):
 *  step 1: the original request goes to P with X-Cinfer-Handoff-Id (32 hex)
 *    and X-Cinfer-Handoff-To (D's base URL). P computes the prompt only
 *    (max_tokens 1, the token discarded), pushes each full prompt block to D
 *    over UCX (xfer/) as soon as its KV is final, writes blocks to the store as
 *    always, and answers {"handoff_id", "prompt_tokens", "cached_tokens",
 *    "transport": "ucx"|"store", "bytes"}. When the direct path fails the
 *    answer is "store": P waits for its store writes first, so D finds them.
 *  step 2: the original request goes to D with X-Cinfer-Handoff-Id. D waits
 *    (at most --handoff-timeout) for the handoff to complete, gives its
 *    records to the engine (verified and installed into the prefix cache as
 *    a store load is) and serves the request normally. No matching handoff:
 *    served anyway (own cache, store, compute) - never an error.
 * Either step may come first.
 *
 * Everything runs on the server's libevent loop thread: the UCX worker's fd
 * and a 1 ms tick while transfers are active drive xfer_progress. */
#ifndef CINFER_SERVE_HANDOFF_H
#define CINFER_SERVE_HANDOFF_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "serve/gen.h"
#include "serve/serve_error.h"
#include "xfer/xfer_wire.h"

typedef enum handoff_role { HANDOFF_ROLE_BOTH = 0, HANDOFF_ROLE_PREFILL, HANDOFF_ROLE_DECODE } handoff_role;

typedef struct handoff_config {
    handoff_role role;
    const char *listen; /* --handoff-listen HOST:PORT, or NULL (decode role: the HTTP host, any port) */
    const char *http_host; /* the server's --host (default listen host) */
    double timeout_s; /* --handoff-timeout: D waits this long for a handoff; P's push deadline */
    int64_t max_bytes; /* --handoff-pool-bytes: the receive-buffer pool, i.e. received records held at once
                        * (0: 1 GiB); a handoff that finds it full waits (back-pressure) */
    bool pool_prefault; /* --handoff-pool-prefault: fault the whole pool in at start */
    bool no_shm; /* --handoff-shm off: never use shared memory for a decode worker of this host */
} handoff_config;

/* "prefill" / "decode" / "both" -> role; -1 when unknown. */
int handoff_role_parse(const char *s);
const char *handoff_role_name(handoff_role r);

typedef struct handoff_mgr handoff_mgr;

int handoff_open(const handoff_config *c, struct event_base *base, cinfer_engine *e, handoff_mgr **out, cf_err *err);
/* Stops every transfer (pending answers are sent as "store"), frees everything. */
void handoff_close(handoff_mgr *m);
/* GET /handoff/info: 200 + JSON (malloc'd) or NULL when this worker takes no handoffs (404). */
char *handoff_info_json(handoff_mgr *m);
/* The handoff series of /metrics (serve_config.extra_metrics shape; ctx: the manager): received bytes
 * placed (pulled straight into a receive buffer) vs copied, the pool's size, use and waits. */
int handoff_metrics(void *ctx, char **out, size_t *len);

/* The request's handoff headers. 0 with h->present false when there are none, 0 with them parsed,
 * or -1 with a 400 (a malformed id or URL, or a header this role does not take). */
typedef struct handoff_req {
    bool present, to_present;
    uint8_t id[XFER_ID_BYTES];
    char id_hex[2 * XFER_ID_BYTES + 1];
    char to[256]; /* D's base URL (step 1) */
    char auth[512]; /* the Authorization header, forwarded to D's /handoff/info */
} handoff_req;
int handoff_read_headers(const handoff_mgr *m, struct evhttp_request *req, handoff_req *h, serve_error *e);

/* ---- prefill side (step 1) ---- */
typedef struct handoff_push handoff_push;
/* The answer: status 200 with JSON (malloc'd), or 500 with NULL (out of memory). */
typedef void (*handoff_answer_fn)(void *ctx, int status, char *json);
/* Rewrites the job's params for a prefill-only run (n 1, max_tokens 1, no stream, no logprobs). */
void handoff_prefill_params(gen_params *p);
/* Before gen_job_submit: attaches an export to g and starts resolving D. NULL with e on failure. */
handoff_push *handoff_push_start(handoff_mgr *m, const handoff_req *h, gen_job *g, serve_error *e);
/* The engine request finished (usage final): cb runs once, later, on the loop. */
void handoff_push_finish(handoff_push *p, const cinfer_usage *u, handoff_answer_fn cb, void *ctx);
/* The job went away (client gone, failure): no answer; the push ends by itself. */
void handoff_push_detach(handoff_push *p);

/* ---- decode side (step 2) ---- */
typedef void (*handoff_ready_fn)(void *ctx);
/* Parks a prepared job until handoff id completes, fails or times out: true when parked (cb runs
 * once, later); false when there is nothing to wait for (claim at once). */
bool handoff_wait(handoff_mgr *m, const uint8_t id[XFER_ID_BYTES], handoff_ready_fn cb, void *ctx);
/* The prefill worker gave up on handoff id (POST /handoff/abort): a parked job stops waiting, a
 * later one does not wait. */
void handoff_abort(handoff_mgr *m, const uint8_t id[XFER_ID_BYTES]);
/* Gives the job the handoff's records (g->kv_import) when they match its prompt and salt; the
 * handoff is consumed either way. */
void handoff_claim(handoff_mgr *m, const uint8_t id[XFER_ID_BYTES], gen_job *g);

#endif
