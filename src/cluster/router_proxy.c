/* router_proxy.c - one client request through the router: pick a worker,
 * forward the body unchanged (same method, path, query and end-to-end
 * headers), relay the answer, retry elsewhere when that is still invisible to
 * the client.
 *
 * Relay: an upstream answer with Content-Type text/event-stream is relayed
 * chunk by chunk as it arrives (the client's reply starts with the upstream
 * status and headers); when more than conn_buffer bytes wait unsent to the
 * client, reading from the worker pauses until they drain (back-pressure
 * reaches the worker's own stream pause). Any other answer is collected and
 * sent whole with its status and headers, so a worker that dies before it
 * finished a non-streamed answer is retried without the client noticing.
 *
 * Retries (at most max_attempts tries, each on a worker not tried before):
 * connection refused, reset or closed before the client saw anything; 429 or
 * 503 from a full or draining worker. When no worker is eligible (all tried,
 * unhealthy or full), the request waits (back-pressure) and retries every
 * 100 ms until queue_timeout; then the last 429/503 answer is relayed, or a
 * 503 in the API's error shape. A stream that breaks after it started is
 * resumed on another worker with cinfer.resume (router_resume.h: the relay
 * passes committed events only); with none to resume on it ends with an SSE
 * error event.
 *
 * PD mode (prefill and decode workers registered): step 1 sends the request
 * to a prefill worker with X-Cinfer-Handoff-Id / -To (the decode worker's
 * URL); step 2 sends it to that decode worker with the handoff id and relays
 * its answer. By default both go out at once (router_prefill.c: D waits for
 * the handoff while P computes, so the client's wait is one prefill, not a
 * prefill plus a decode worker's start); a step 1 that does not end in a
 * handoff makes the router tell D to stop waiting. With pd_sequential, step 2
 * goes after step 1 answered: a 4xx other than 429 from step 1 is the
 * client's error and is relayed; any other step-1 failure goes on to step 2
 * (the decode worker then computes the prompt itself). A step 2 retried on
 * another worker goes without the handoff id (the KV went elsewhere).
 *
 * Lifetime: a proxy_req lives from router_proxy_start until its client got
 * the whole answer or left; it owns its upstream request while one is open
 * (cancelled when the client leaves). */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/randid.h"
#include "base/timeutil.h"
#include "cluster/router_internal.h"
#include "cluster/router_resume.h"

enum { PHASE_DIRECT = 0, PHASE_PREFILL, PHASE_DECODE };

struct proxy_req {
    router *r;
    proxy_req *prev, *next;
    struct evhttp_request *client;
    enum evhttp_cmd_type cmd;
    char *uri; /* path and query, sent upstream unchanged */
    char path[128];
    struct evbuffer *body; /* the request body, kept for retries */
    router_prompt prompt;
    uint64_t *chain;
    int32_t n_chain;
    route_request est;
    int phase;
    char handoff_id[CF_RANDID_CHARS + 1];
    int32_t decode_worker; /* PD: chosen with the prefill worker */
    prefill_side *side; /* PD, overlapped: step 1 in flight beside step 2 */
    int32_t worker; /* current upstream (-1: none) */
    route_policy_kind used_policy;
    uint64_t tried; /* bitmask of workers tried in this phase */
    int32_t attempts;
    struct evhttp_connection *up_conn;
    struct evhttp_request *up_req;
    double sent_cost; /* accounting added to the current worker */
    int64_t sent_kv;
    int up_status;
    bool up_failed, relay_started, up_full, paused;
    bool flush_tracked; /* the final send is tracked until written (the drain waits for it) */
    struct evbuffer *up_body;
    struct evkeyvalq *up_headers; /* upstream response headers (valid while up_req lives) */
    /* the last full (429/503) answer, relayed if no worker frees up */
    int full_status;
    char *full_body, *full_ctype;
    size_t full_len;
    double t0, wait_deadline;
    struct event *retry_timer;
    /* mid-stream resume (router_resume.h): up_streaming: this upstream's body goes to the client;
     * resumable: it marks its reads (X-Cinfer-Resumable); marked: the client's stream came from such
     * workers only (it can be resumed); resume_body: the body of the next try (NULL: the client's) */
    bool up_streaming, resumable, marked;
    router_resume rs;
    char *resume_body;
    size_t resume_len;
};

static void proxy_attempt(proxy_req *p);
static bool is_generation(const char *path);

static bool is_hop_header(const char *k) {
    static const char *const hop[] = {"Connection",
                                      "Keep-Alive",
                                      "Proxy-Authenticate",
                                      "Proxy-Authorization",
                                      "TE",
                                      "Trailer",
                                      "Transfer-Encoding",
                                      "Upgrade",
                                      "Host",
                                      "Content-Length",
                                      "X-Cinfer-Handoff-Id",
                                      "X-Cinfer-Handoff-To",
                                      "X-Cinfer-Stream-Ids"};
    for (size_t i = 0; i < sizeof hop / sizeof *hop; i++)
        if (!strcasecmp(k, hop[i])) return true;
    return false;
}

static bool api_is_messages(const char *path) { return !strncmp(path, "/v1/messages", 12); }

static router_resp_slot *resp_slot(const proxy_req *p, const char *id, uint64_t *key) {
    uint64_t k = prefix_hash_bytes(prefix_hash_bytes(7, p->prompt.tenant, strlen(p->prompt.tenant)), id, strlen(id));
    *key = k | 1; /* 0 marks an empty slot */
    return &p->r->resp_owner[k % ROUTER_RESP_SLOTS];
}

/* A Responses answer from the current worker: remember it holds that response (X-Request-Id). */
static void resp_remember(proxy_req *p) {
    const char *id = p->up_headers ? evhttp_find_header(p->up_headers, "X-Request-Id") : NULL;
    if (strcmp(p->path, "/v1/responses") || p->worker < 0 || !id || strncmp(id, "resp_", 5)) return;
    uint64_t key;
    router_resp_slot *s = resp_slot(p, id, &key);
    *s = (router_resp_slot){.key = key, .worker = p->worker};
}

/* The worker that answered previous_response_id, when known, healthy, untried and of role `role`. */
static int32_t resp_owner(proxy_req *p, router_role role) {
    if (!p->prompt.prev_response[0]) return -1;
    uint64_t key;
    const router_resp_slot *s = resp_slot(p, p->prompt.prev_response, &key);
    if (s->key != key || s->worker < 0 || s->worker >= p->r->n_w) return -1;
    const router_worker *w = &p->r->w[s->worker];
    bool role_ok = w->role == role || w->role == ROUTER_ROLE_BOTH;
    bool tried = s->worker < 64 && (p->tried >> s->worker & 1);
    return w->view.healthy && role_ok && !tried ? s->worker : -1;
}

static void on_flushed(struct evhttp_request *req, void *arg) {
    router *r = arg;
    struct evhttp_connection *cc = evhttp_request_get_connection(req);
    if (cc) evhttp_connection_set_closecb(cc, NULL, NULL);
    r->n_flushing--;
    router_request_done(r);
}

static void on_flush_failed(struct evhttp_connection *evcon, void *arg) {
    router *r = arg;
    (void)evcon;
    r->n_flushing--;
    router_request_done(r);
}

/* The reply's last bytes are being handed to evhttp: count it until they are written. */
static void track_flush(proxy_req *p) {
    struct evhttp_connection *cc = evhttp_request_get_connection(p->client);
    if (cc) evhttp_connection_set_closecb(cc, on_flush_failed, p->r);
    evhttp_request_set_on_complete_cb(p->client, on_flushed, p->r);
    p->r->n_flushing++;
    p->flush_tracked = true;
}

static void reply_whole(proxy_req *p, int status, const char *reason, struct evbuffer *b) {
    track_flush(p);
    evhttp_send_reply(p->client, status, reason, b);
}

static void reply_end(proxy_req *p) {
    track_flush(p);
    evhttp_send_reply_end(p->client);
}

/* An error answer made by the router itself, in the API's error shape. */
static void proxy_send_error(proxy_req *p, int status, const char *type, const char *msg) {
    if (p->relay_started) { /* the client has a stream: end it with an SSE error event (no hang) */
        struct evbuffer *b = p->r->scratch_buf;
        evbuffer_add_printf(b,
                            "event: error\ndata: {\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"code\":"
                            "\"upstream_error\"}}\n\n",
                            msg, type);
        evhttp_send_reply_chunk(p->client, b);
        reply_end(p);
        return;
    }
    json_t *e = api_is_messages(p->path)
                    ? json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", type, "message", msg)
                    : json_pack("{s:{s:s, s:s, s:n, s:s}}", "error", "message", msg, "type", type, "param", "code",
                                status == 503 ? "no_worker_available" : "upstream_error");
    char *txt = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    struct evbuffer *b = p->r->scratch_buf;
    evbuffer_drain(b, evbuffer_get_length(b));
    if (txt) evbuffer_add(b, txt, strlen(txt));
    free(txt);
    evhttp_add_header(evhttp_request_get_output_headers(p->client), "Content-Type", "application/json");
    reply_whole(p, status, status == 503 ? "Service Unavailable" : "Bad Gateway", b);
}

static void proxy_free(proxy_req *p) {
    router *r = p->r;
    if (p->prev) p->prev->next = p->next;
    else r->reqs = p->next;
    if (p->next) p->next->prev = p->prev;
    prefill_side_cancel(p->side);
    if (p->retry_timer) event_free(p->retry_timer);
    if (p->body) evbuffer_free(p->body);
    if (p->up_body) evbuffer_free(p->up_body);
    router_prompt_free(&p->prompt);
    free(p->chain);
    free(p->uri);
    free(p->full_body);
    free(p->full_ctype);
    free(p->resume_body);
    router_resume_free(&p->rs);
    free(p);
    r->active--;
    router_request_done(r);
}

/* Undoes the in-flight accounting of the current worker. */
static void proxy_unaccount(proxy_req *p) {
    if (p->worker < 0) return;
    router_worker *w = &p->r->w[p->worker];
    w->inflight--;
    w->inflight_cost -= p->sent_cost;
    w->inflight_kv -= p->sent_kv;
    if (w->inflight <= 0) w->inflight = 0, w->inflight_cost = 0, w->inflight_kv = 0;
    p->sent_cost = 0, p->sent_kv = 0;
}

/* The client reply is complete (or impossible): account and free. */
static void proxy_done(proxy_req *p, int status) {
    router *r = p->r;
    struct evhttp_connection *cc = p->client ? evhttp_request_get_connection(p->client) : NULL;
    if (cc && !p->flush_tracked) evhttp_connection_set_closecb(cc, NULL, NULL);
    int cls = status / 100;
    r->m.requests_by_class[cls >= 1 && cls <= 5 ? cls : 0]++;
    router_metrics_observe(&r->m.lat_sum, &r->m.lat_n, r->m.lat_counts, time_now() - p->t0);
    proxy_free(p);
}

/* Upstream request for the current worker is over (completed, failed or cancelled). */
static void proxy_drop_upstream(proxy_req *p, bool cancel) {
    if (p->up_req && cancel) {
        evhttp_request_set_error_cb(p->up_req, NULL);
        evhttp_cancel_request(p->up_req); /* frees it, no callback */
    }
    if (p->up_conn) router_free_conn_later(p->r, p->up_conn); /* ours (not auto-freed): freed once, later */
    p->up_req = NULL;
    p->up_conn = NULL;
    p->up_headers = NULL;
    p->up_streaming = false;
    proxy_unaccount(p);
    p->worker = -1;
}

static void on_client_close(struct evhttp_connection *evcon, void *arg) {
    proxy_req *p = arg;
    (void)evcon;
    LOG_DEBUG("router: client left %s", p->path);
    proxy_drop_upstream(p, true);
    bool detached = evhttp_request_get_connection(p->client) == NULL;
    if (detached) evhttp_request_free(p->client);
    p->client = NULL;
    proxy_done(p, 0);
}

static void on_client_drained(struct evhttp_connection *evcon, void *arg) {
    proxy_req *p = arg;
    (void)evcon;
    if (p->paused && p->up_conn) {
        struct bufferevent *bev = evhttp_connection_get_bufferevent(p->up_conn);
        if (bev) bufferevent_enable(bev, EV_READ);
        p->paused = false;
    }
}

static size_t client_unsent(struct evhttp_request *req) {
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

static void copy_response_headers(proxy_req *p, const struct evkeyvalq *from) {
    struct evkeyvalq *to = evhttp_request_get_output_headers(p->client);
    for (const struct evkeyval *h = from ? from->tqh_first : NULL; h; h = h->next.tqe_next)
        if (!is_hop_header(h->key) && strcasecmp(h->key, "Date")) evhttp_add_header(to, h->key, h->value);
    if (p->worker >= 0) evhttp_add_header(to, "X-Cinfer-Worker", p->r->w[p->worker].url);
}

static int on_up_header(struct evhttp_request *up, void *arg) {
    proxy_req *p = arg;
    router *r = p->r;
    p->up_status = evhttp_request_get_response_code(up);
    p->up_headers = evhttp_request_get_input_headers(up);
    router_metrics_observe(&r->m.ttfb_sum, &r->m.ttfb_n, r->m.ttfb_counts, time_now() - p->t0);
    if (p->phase == PHASE_PREFILL) return 0;
    if (p->up_status == 429 || p->up_status == 503) {
        p->up_full = true;
        return 0;
    }
    const char *ct = evhttp_find_header(p->up_headers, "Content-Type");
    bool sse = ct && !strncasecmp(ct, "text/event-stream", 17);
    if (p->relay_started) { /* a resume: only a 200 stream of a worker that understood it continues it */
        p->up_streaming = p->resumable =
            sse && p->up_status == 200 && evhttp_find_header(p->up_headers, "X-Cinfer-Resumable");
        return 0;
    }
    if (sse) {
        if (p->up_status == 200) resp_remember(p);
        copy_response_headers(p, p->up_headers);
        evhttp_remove_header(evhttp_request_get_output_headers(p->client), "X-Cinfer-Resumable");
        evhttp_send_reply_start(p->client, p->up_status, evhttp_request_get_response_code_line(up));
        p->relay_started = p->up_streaming = true;
        p->resumable = p->marked = p->up_status == 200 && evhttp_find_header(p->up_headers, "X-Cinfer-Resumable");
    }
    return 0;
}

static void on_up_chunk(struct evhttp_request *up, void *arg) {
    proxy_req *p = arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(up);
    if (!p->up_streaming) {
        evbuffer_add_buffer(p->up_body, in);
        return;
    }
    if (p->resumable) { /* whole, committed events only (router_resume.h) */
        struct evbuffer *out = p->r->scratch_buf;
        if (router_resume_feed(&p->rs, in, out, !strcmp(p->path, "/v1/responses"))) {
            LOG_WARN("router: %s: malformed resume marks from %s; the stream is relayed without resume", p->path,
                     p->worker >= 0 ? p->r->w[p->worker].url : "?");
            router_resume_flush(&p->rs, out);
            p->resumable = p->marked = false;
        }
        evhttp_send_reply_chunk_with_cb(p->client, out, on_client_drained, p);
        evbuffer_drain(out, evbuffer_get_length(out));
    } else evhttp_send_reply_chunk_with_cb(p->client, in, on_client_drained, p);
    if (!p->paused && client_unsent(p->client) > p->r->cfg->conn_buffer && p->up_conn) {
        struct bufferevent *bev = evhttp_connection_get_bufferevent(p->up_conn);
        if (bev) bufferevent_disable(bev, EV_READ);
        p->paused = true;
    }
}

static void on_up_error(enum evhttp_request_error e, void *arg) {
    proxy_req *p = arg;
    p->up_failed = true;
    LOG_INFO("router: %s on %s failed (libevent error %d)", p->path, p->worker >= 0 ? p->r->w[p->worker].url : "?",
             (int)e);
}

/* Learns tokens per prompt byte from a usage object of a whole JSON answer. */
static void learn_usage(proxy_req *p, const char *body, size_t len) {
    if (!p->prompt.text || p->prompt.len < 64) return;
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *u = root ? json_object_get(root, "usage") : NULL;
    json_t *pt = u ? json_object_get(u, "prompt_tokens") : NULL;
    if (!pt && u) pt = json_object_get(u, "input_tokens");
    if (json_is_integer(pt) && json_integer_value(pt) > 0) {
        double tpb = (double)json_integer_value(pt) / (double)p->prompt.len;
        if (tpb > 0.01 && tpb < 4) p->r->tokens_per_byte = 0.9 * p->r->tokens_per_byte + 0.1 * tpb;
    }
    json_decref(root);
}

static void proxy_send_whole(proxy_req *p, int status, const char *reason) {
    copy_response_headers(p, p->up_headers);
    size_t n = evbuffer_get_length(p->up_body);
    if (status == 200 && n) learn_usage(p, (const char *)evbuffer_pullup(p->up_body, -1), n);
    if (status == 200) resp_remember(p);
    reply_whole(p, status, reason, p->up_body);
}

static void proxy_keep_full(proxy_req *p) {
    free(p->full_body);
    free(p->full_ctype);
    p->full_status = p->up_status;
    p->full_len = evbuffer_get_length(p->up_body);
    p->full_body = malloc(p->full_len + 1);
    if (p->full_body) evbuffer_copyout(p->up_body, p->full_body, p->full_len);
    else p->full_len = 0;
    const char *ct = p->up_headers ? evhttp_find_header(p->up_headers, "Content-Type") : NULL;
    p->full_ctype = ct ? strdup(ct) : NULL;
}

static void proxy_retry_later(proxy_req *p, double delay_s) {
    struct timeval tv = {.tv_sec = (time_t)delay_s, .tv_usec = (suseconds_t)((delay_s - (time_t)delay_s) * 1e6)};
    evtimer_add(p->retry_timer, &tv);
}

/* The step-1 (prefill) answer was not the client's error: go on to the decode worker. */
static void proxy_prefill_done(proxy_req *p, int status, bool failed) {
    router *r = p->r;
    if (failed || status != 200) {
        r->m.handoff_failures++;
        LOG_INFO("router: handoff %s: prefill step %s (status %d); the decode worker computes the prompt",
                 p->handoff_id, failed ? "failed" : "refused", status);
    } else r->m.handoffs++;
    p->phase = PHASE_DECODE;
    p->tried = 0;
    p->attempts = 0;
    evbuffer_drain(p->up_body, evbuffer_get_length(p->up_body));
    proxy_attempt(p);
}

/* The upstream of a started stream failed (or a resume try was refused): resume it on another
 * worker when its reads were marked, else end it with an error event. */
static void proxy_stream_broke(proxy_req *p, bool failed, int status) {
    router *r = p->r;
    int32_t wi = p->worker;
    if (failed && wi >= 0) router_worker_failed(r, wi);
    if (p->up_full && wi >= 0) r->w[wi].n_full++;
    if (wi >= 0 && wi < 64) p->tried |= 1ull << wi;
    if (wi >= 0) r->w[wi].n_retries_from++;
    bool refused = !failed && !p->up_full && status >= 400 && status < 500; /* the resume body itself */
    bool can = p->marked && !refused && ++p->attempts < r->cfg->max_attempts;
    proxy_drop_upstream(p, false);
    evbuffer_drain(p->up_body, evbuffer_get_length(p->up_body));
    p->up_full = p->up_failed = false;
    p->up_status = 0;
    size_t blen = evbuffer_get_length(p->body);
    free(p->resume_body);
    p->resume_body = NULL;
    if (can && p->rs.commented) { /* else nothing but the headers reached the client: send the request as it was */
        p->resume_body =
            router_resume_body(&p->rs, blen ? (const char *)evbuffer_pullup(p->body, -1) : "", blen, &p->resume_len);
        can = p->resume_body != NULL;
    }
    if (!can) {
        proxy_send_error(p, 502, "server_error",
                         failed ? "the worker serving this stream failed" : "the stream could not be resumed");
        proxy_done(p, failed ? 502 : status);
        return;
    }
    LOG_INFO("router: %s: stream broke after %d tokens; resuming on another worker", p->path, p->rs.n_ids);
    router_resume_rewind(&p->rs);
    r->m.retries++;
    r->m.resumes++;
    p->handoff_id[0] = 0; /* a resume is one step on one worker */
    if (p->phase == PHASE_PREFILL) p->phase = PHASE_DECODE;
    proxy_attempt(p);
}

static void on_up_done(struct evhttp_request *up, void *arg) {
    proxy_req *p = arg;
    router *r = p->r;
    int32_t wi = p->worker;
    bool failed = p->up_failed || up == NULL || p->up_status == 0;
    int status = p->up_status;
    const char *reason = up ? evhttp_request_get_response_code_line(up) : NULL;
    char reason_copy[64];
    snprintf(reason_copy, sizeof reason_copy, "%s", reason && *reason ? reason : "OK");
    if (failed && wi >= 0) {
        r->m.upstream_errors++;
        r->w[wi].n_errors++;
    }
    if (p->phase == PHASE_PREFILL) {
        if (!failed && status >= 400 && status < 500 && status != 429) { /* the client's error: relay it */
            proxy_send_whole(p, status, reason_copy);
            proxy_drop_upstream(p, false);
            proxy_done(p, status);
            return;
        }
        proxy_drop_upstream(p, false);
        proxy_prefill_done(p, status, failed);
        return;
    }
    if (p->relay_started) { /* the stream was relayed; it ended cleanly or broke */
        if (!failed && p->up_streaming) {
            if (p->resumable) {
                router_resume_flush(&p->rs, r->scratch_buf);
                evhttp_send_reply_chunk(p->client, r->scratch_buf);
            }
            proxy_drop_upstream(p, false);
            reply_end(p);
            proxy_done(p, 200);
            return;
        }
        proxy_stream_broke(p, failed, status);
        return;
    }
    if (failed || p->up_full) {
        if (failed && wi >= 0) router_worker_failed(r, wi);
        if (p->up_full) {
            r->w[wi].n_full++;
            proxy_keep_full(p);
        }
        if (wi >= 0 && wi < 64) p->tried |= 1ull << wi;
        if (wi >= 0) r->w[wi].n_retries_from++;
        proxy_drop_upstream(p, false);
        evbuffer_drain(p->up_body, evbuffer_get_length(p->up_body));
        p->up_full = p->up_failed = false;
        p->up_status = 0;
        r->m.retries++;
        if (++p->attempts >= r->cfg->max_attempts) {
            if (p->full_status) {
                evhttp_add_header(evhttp_request_get_output_headers(p->client), "Content-Type",
                                  p->full_ctype ? p->full_ctype : "application/json");
                evbuffer_add(p->up_body, p->full_body ? p->full_body : "", p->full_len);
                reply_whole(p, p->full_status, "Busy", p->up_body);
                proxy_done(p, p->full_status);
            } else {
                proxy_send_error(p, 502, "server_error", "every worker tried failed before answering");
                proxy_done(p, 502);
            }
            return;
        }
        proxy_attempt(p);
        return;
    }
    if (status == 404 && p->prompt.prev_response[0] &&
        evbuffer_search(p->up_body, "previous_response_not_found", 27, NULL).pos >= 0) {
        /* another worker may hold the previous response (the router restarted, or its table slot was
         * reused): try the others before relaying the 404 */
        proxy_keep_full(p);
        if (wi >= 0 && wi < 64) p->tried |= 1ull << wi;
        proxy_drop_upstream(p, false);
        evbuffer_drain(p->up_body, evbuffer_get_length(p->up_body));
        p->up_status = 0;
        p->attempts++;
        p->handoff_id[0] = 0;
        proxy_attempt(p);
        return;
    }
    proxy_send_whole(p, status, reason_copy);
    proxy_drop_upstream(p, false);
    proxy_done(p, status);
}

static void on_retry_timer(evutil_socket_t fd, short ev, void *arg) {
    (void)fd, (void)ev;
    proxy_req *p = arg;
    p->tried = 0; /* after a wait every worker may have room again */
    proxy_attempt(p);
}

static router_role phase_role(const proxy_req *p) {
    return p->phase == PHASE_PREFILL  ? ROUTER_ROLE_PREFILL
           : p->phase == PHASE_DECODE ? ROUTER_ROLE_DECODE
                                      : ROUTER_ROLE_BOTH;
}

static int32_t proxy_pick(proxy_req *p, route_policy_kind *used) {
    router *r = p->r;
    const router_config *c = r->cfg;
    if (p->phase == PHASE_DECODE && p->decode_worker >= 0 && p->attempts == 0) {
        *used = c->decode_policy; /* the worker step 1 handed the KV to */
        int32_t d = p->decode_worker;
        if (r->w[d].view.healthy) return d;
    }
    int32_t owner = p->phase == PHASE_PREFILL ? -1 : resp_owner(p, phase_role(p));
    if (owner >= 0) { /* a follow-up goes to the worker holding its previous response */
        *used = p->phase == PHASE_DECODE ? c->decode_policy : c->policy;
        return owner;
    }
    *used = p->phase == PHASE_PREFILL ? c->prefill_policy : p->phase == PHASE_DECODE ? c->decode_policy : c->policy;
    router_workers_view(r, phase_role(p), p->tried, p->chain, p->n_chain, p->est.prompt_tokens);
    return route_pick(*used, r->scratch, r->n_w, &p->est, &c->params, &r->rr_cursor);
}

static void add_request_headers(proxy_req *p, struct evhttp_request *up, const router_worker *w) {
    struct evkeyvalq *out = evhttp_request_get_output_headers(up);
    const struct evkeyvalq *in = evhttp_request_get_input_headers(p->client);
    for (const struct evkeyval *h = in ? in->tqh_first : NULL; h; h = h->next.tqe_next)
        if (!is_hop_header(h->key)) evhttp_add_header(out, h->key, h->value);
    char host[256];
    snprintf(host, sizeof host, "%s:%d", w->host, w->port);
    evhttp_add_header(out, "Host", host);
    evhttp_add_header(out, "Connection", "close"); /* one connection per request, freed when it ends */
    if (p->handoff_id[0] && (p->phase == PHASE_PREFILL || w == &p->r->w[p->decode_worker]))
        evhttp_add_header(out, "X-Cinfer-Handoff-Id", p->handoff_id);
    if (p->cmd == EVHTTP_REQ_POST && p->phase != PHASE_PREFILL && is_generation(p->path))
        evhttp_add_header(out, "X-Cinfer-Stream-Ids", "1"); /* mark the stream's reads: it can be resumed */
    if (p->phase == PHASE_PREFILL) evhttp_add_header(out, "X-Cinfer-Handoff-To", p->r->w[p->decode_worker].url);
}

static void proxy_send(proxy_req *p, int32_t i, route_policy_kind used) {
    router *r = p->r;
    router_worker *w = &r->w[i];
    p->worker = i;
    p->used_policy = used;
    w->decisions[used]++;
    w->n_requests++;
    w->inflight++;
    p->sent_cost = route_prefill_score(&(route_worker){.cached_tokens = w->view.cached_tokens, .speed = 1}, &p->est,
                                       &r->cfg->params);
    p->sent_kv = (int64_t)p->est.prompt_tokens + p->est.max_tokens;
    w->inflight_cost += p->sent_cost;
    w->inflight_kv += p->sent_kv;
    router_note_prefix(r, i, p->chain, p->n_chain, p->phase != PHASE_DECODE);
    p->up_conn = evhttp_connection_base_new(r->base, NULL, w->host, (unsigned short)w->port);
    p->up_req = p->up_conn ? evhttp_request_new(on_up_done, p) : NULL;
    if (!p->up_req) {
        if (p->up_conn) evhttp_connection_free(p->up_conn);
        p->up_conn = NULL;
        proxy_unaccount(p);
        p->worker = -1;
        proxy_send_error(p, 502, "server_error", "out of memory");
        proxy_done(p, 502);
        return;
    }
    evhttp_connection_set_timeout(p->up_conn, (int)(r->cfg->upstream_timeout_s + 0.5)); /* freed by drop_upstream */
    evhttp_request_set_header_cb(p->up_req, on_up_header);
    evhttp_request_set_chunked_cb(p->up_req, on_up_chunk);
    evhttp_request_set_error_cb(p->up_req, on_up_error);
    add_request_headers(p, p->up_req, w);
    if (p->resume_body) evbuffer_add(evhttp_request_get_output_buffer(p->up_req), p->resume_body, p->resume_len);
    else if (evbuffer_get_length(p->body))
        evbuffer_add(evhttp_request_get_output_buffer(p->up_req), evbuffer_pullup(p->body, -1),
                     evbuffer_get_length(p->body));
    p->up_status = 0;
    if (evhttp_make_request(p->up_conn, p->up_req, p->cmd, p->uri)) { /* frees up_req */
        p->up_req = NULL;
        evhttp_connection_free(p->up_conn);
        p->up_conn = NULL;
        p->up_failed = true;
        on_up_done(NULL, p);
    }
}

static const char *client_auth(const proxy_req *p) {
    const struct evkeyvalq *ih = p->client ? evhttp_request_get_input_headers(p->client) : NULL;
    return ih ? evhttp_find_header(ih, "Authorization") : NULL;
}

/* Step 1 of an overlapped PD request ended: count it; when it handed nothing off, D stops waiting. */
static void on_side_done(void *ctx, int status, bool failed) {
    proxy_req *p = ctx;
    p->side = NULL;
    if (failed || status != 200) {
        p->r->m.handoff_failures++;
        LOG_INFO("router: handoff %s: prefill step %s (status %d); the decode worker computes the prompt",
                 p->handoff_id, failed ? "failed" : "refused", status);
        if (p->worker == p->decode_worker && p->decode_worker >= 0 && p->handoff_id[0])
            router_handoff_abort(p->r, p->decode_worker, p->handoff_id, client_auth(p));
        p->handoff_id[0] = 0; /* a step 2 sent from now on does not wait */
    } else {
        p->r->m.handoffs++;
    }
}

/* Overlapped PD: sends step 1 to a prefill worker beside the step 2 about to go to D. */
static void proxy_start_side(proxy_req *p) {
    route_policy_kind used;
    int32_t i = proxy_pick(p, &used);
    size_t blen = evbuffer_get_length(p->body);
    prefill_side_args a = {.cmd = p->cmd,
                           .uri = p->uri,
                           .headers = evhttp_request_get_input_headers(p->client),
                           .is_hop = is_hop_header,
                           .body = blen ? evbuffer_pullup(p->body, -1) : NULL,
                           .body_len = blen,
                           .handoff_id = p->handoff_id,
                           .decode_url = p->r->w[p->decode_worker].url,
                           .policy = used};
    if (i >= 0) {
        a.cost = route_prefill_score(&(route_worker){.cached_tokens = p->r->w[i].view.cached_tokens, .speed = 1},
                                     &p->est, &p->r->cfg->params);
        router_note_prefix(p->r, i, p->chain, p->n_chain, true);
        p->side = prefill_side_start(p->r, i, &a, on_side_done, p);
    }
    if (!p->side) { /* no prefill worker (or no memory): D computes alone, without waiting */
        p->r->m.handoff_failures++;
        p->handoff_id[0] = 0;
    }
    p->phase = PHASE_DECODE;
}

static void proxy_attempt(proxy_req *p) {
    router *r = p->r;
    if (p->phase == PHASE_PREFILL && p->decode_worker < 0) { /* choose D first: P needs its URL */
        p->phase = PHASE_DECODE;
        route_policy_kind used;
        int32_t d = proxy_pick(p, &used);
        p->phase = PHASE_PREFILL;
        if (d < 0) { /* no decode worker now: wait like any full pick */
            if (time_now() < p->wait_deadline) {
                r->m.backpressure_waits++;
                proxy_retry_later(p, 0.1);
                return;
            }
            r->m.backpressure_timeouts++;
            proxy_send_error(p, 503, "server_error", "no decode worker is available");
            proxy_done(p, 503);
            return;
        }
        p->decode_worker = d;
        if (!r->cfg->pd_sequential) proxy_start_side(p);
    }
    route_policy_kind used;
    int32_t i = proxy_pick(p, &used);
    if (i < 0 && p->phase == PHASE_PREFILL) { /* no prefill worker: the decode worker computes alone */
        proxy_prefill_done(p, 0, true);
        return;
    }
    if (i < 0 && p->full_status == 404) { /* no other worker holds the previous response: relay the 404 */
        evhttp_add_header(evhttp_request_get_output_headers(p->client), "Content-Type",
                          p->full_ctype ? p->full_ctype : "application/json");
        evbuffer_add(p->up_body, p->full_body ? p->full_body : "", p->full_len);
        reply_whole(p, 404, "Not Found", p->up_body);
        proxy_done(p, 404);
        return;
    }
    if (i < 0) {
        if (time_now() < p->wait_deadline && !r->draining) {
            r->m.backpressure_waits++;
            proxy_retry_later(p, 0.1);
            return;
        }
        r->m.backpressure_timeouts++;
        if (p->full_status && !p->relay_started) {
            evhttp_add_header(evhttp_request_get_output_headers(p->client), "Content-Type",
                              p->full_ctype ? p->full_ctype : "application/json");
            evbuffer_add(p->up_body, p->full_body ? p->full_body : "", p->full_len);
            reply_whole(p, p->full_status, "Busy", p->up_body);
            proxy_done(p, p->full_status);
            return;
        }
        proxy_send_error(p, 503, "server_error", "no worker is available (all unhealthy or full)");
        proxy_done(p, 503);
        return;
    }
    proxy_send(p, i, used);
}

static bool has_role(const router *r, router_role role) {
    for (int32_t i = 0; i < r->n_w; i++)
        if (r->w[i].role == role) return true;
    return false;
}

static bool is_generation(const char *path) {
    return !strcmp(path, "/v1/chat/completions") || !strcmp(path, "/v1/completions") || !strcmp(path, "/v1/messages") ||
           !strcmp(path, "/v1/responses");
}

void router_proxy_start(router *r, struct evhttp_request *client, const char *path) {
    proxy_req *p = calloc(1, sizeof *p);
    const char *uri = evhttp_request_get_uri(client);
    if (p) {
        p->body = evbuffer_new();
        p->up_body = evbuffer_new();
        p->uri = strdup(uri ? uri : path);
        p->retry_timer = evtimer_new(r->base, on_retry_timer, p);
    }
    if (!p || !p->body || !p->up_body || !p->uri || !p->retry_timer || router_resume_init(&p->rs)) {
        if (p) {
            router_resume_free(&p->rs);
            if (p->retry_timer) event_free(p->retry_timer);
            if (p->body) evbuffer_free(p->body);
            if (p->up_body) evbuffer_free(p->up_body);
            free(p->uri);
            free(p);
        }
        evhttp_send_error(client, 500, "out of memory");
        return;
    }
    p->r = r;
    p->client = client;
    p->cmd = evhttp_request_get_command(client);
    snprintf(p->path, sizeof p->path, "%s", path);
    p->worker = p->decode_worker = -1;
    p->t0 = time_now();
    p->wait_deadline = p->t0 + r->cfg->queue_timeout_s;
    evbuffer_add_buffer(p->body, evhttp_request_get_input_buffer(client));
    p->next = r->reqs;
    if (r->reqs) r->reqs->prev = p;
    r->reqs = p;
    r->active++;
    bool gen = p->cmd == EVHTTP_REQ_POST && is_generation(path);
    size_t blen = evbuffer_get_length(p->body);
    router_prompt_from_body(path, blen ? (const char *)evbuffer_pullup(p->body, -1) : "", blen, &p->prompt);
    const struct evkeyvalq *ih = evhttp_request_get_input_headers(client);
    const char *auth = evhttp_find_header(ih, "Authorization");
    if (!auth) auth = evhttp_find_header(ih, "x-api-key");
    snprintf(p->prompt.tenant, sizeof p->prompt.tenant, "%s", auth ? auth : "");
    size_t tlen = strlen(p->prompt.tenant);
    if (p->prompt.text) {
        int32_t cap = (int32_t)(p->prompt.len / PREFIX_CHUNK_BYTES);
        if (cap > PREFIX_MAX_CHUNKS) cap = PREFIX_MAX_CHUNKS;
        p->chain = cap > 0 ? malloc((size_t)cap * sizeof *p->chain) : NULL;
        if (p->chain) p->n_chain = prefix_chain(p->prompt.tenant, tlen, p->prompt.text, p->prompt.len, p->chain, cap);
    }
    double est = (double)p->prompt.len * r->tokens_per_byte;
    p->est.prompt_tokens = est < 1 ? 1 : est > 1e9 ? 1000000000 : (int32_t)est;
    p->est.max_tokens = p->prompt.max_tokens;
    /* affinity key: the tenant and the first 1 KiB of the prompt (8 chunks), or all of a shorter one */
    int32_t k = p->n_chain < 8 ? p->n_chain : 8;
    p->est.affinity_key = k > 0            ? p->chain[k - 1]
                          : p->prompt.text ? prefix_hash_bytes(prefix_hash_bytes(1, p->prompt.tenant, tlen),
                                                               p->prompt.text, p->prompt.len)
                                           : prefix_hash_bytes(2, p->prompt.tenant, tlen);
    if (gen && has_role(r, ROUTER_ROLE_PREFILL) && has_role(r, ROUTER_ROLE_DECODE) && !p->prompt.prev_response[0]) {
        p->phase = PHASE_PREFILL;
        cf_random_id_or_die("", p->handoff_id, sizeof p->handoff_id);
    } else if (gen && !has_role(r, ROUTER_ROLE_BOTH) && has_role(r, ROUTER_ROLE_DECODE))
        p->phase = PHASE_DECODE; /* decode workers only: they compute prompts themselves */
    else if (!gen && !has_role(r, ROUTER_ROLE_BOTH))
        p->phase = PHASE_DECODE; /* passthrough endpoints: any decode worker answers them */
    evhttp_connection_set_closecb(evhttp_request_get_connection(client), on_client_close, p);
    proxy_attempt(p);
}

void router_proxy_cancel_all(router *r) {
    while (r->reqs) {
        proxy_req *p = r->reqs;
        proxy_drop_upstream(p, true);
        struct evhttp_connection *cc = evhttp_request_get_connection(p->client);
        if (cc) {
            evhttp_connection_set_closecb(cc, NULL, NULL);
            evhttp_connection_free(cc); /* frees the client request with it */
        }
        p->client = NULL;
        proxy_done(p, 0);
    }
}
