/* handoff_push.c - the prefill side of the KV handoff (handoff.h): one
 * handoff_push per step-1 request, from submit until its answer is sent and
 * its last transport operation has completed.
 *
 * States: RESOLVING (D's transport address comes from GET <D>/handoff/info,
 * cached per URL in an hp_peer) -> SENDING (BEGIN, then on every tick the
 * records the engine has exported since the last tick as one RECORDS
 * message: pipelined with the prefill of later chunks; for a window model,
 * once every record went, the window-state snapshot at their end as one
 * WINDOW message, or none when the engine could not take it) -> FLUSHING (END sent,
 * waiting for the endpoint flush that confirms delivery) -> OK; any failure
 * or the push deadline (--handoff-timeout) -> FAILED. The answer goes out once
 * the engine request finished: "ucx" when OK, else "store" after the engine's
 * store writes have drained (bounded), so D finds the blocks in the shared
 * store. A prefill that exported fewer records than BEGIN announced sends
 * ABORT instead of END (D stops waiting) and answers "store".
 *
 * Lifetime: a push is freed by the tick once it is settled (OK / FAILED),
 * answered or detached, and has no transport operation outstanding (their
 * frames live in hp_msg blocks that point back to it). */
#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "serve/handoff_internal.h"

#define HP_STORE_WAIT_S 2.0 /* longest wait for store writes before a "store" answer */
#define HP_PROBE_S 0.02 /* how often a push to a local D checks that D's process still runs */

typedef enum { HP_RESOLVING, HP_SENDING, HP_FLUSHING, HP_OK, HP_FAILED } hp_state;

struct handoff_push {
    struct handoff_push *next;
    handoff_mgr *m;
    uint8_t id[XFER_ID_BYTES];
    char id_hex[2 * XFER_ID_BYTES + 1];
    char url[256], auth[512];
    hp_peer *peer;
    cinfer_kv_export *x; /* a reference */
    xfer_begin begin;
    uint8_t begin_data[XFER_BEGIN_BYTES];
    int32_t sent; /* records handed to the transport */
    uint32_t win_sent; /* WINDOW messages handed to the transport (0 or 1) */
    bool win_settled; /* the window snapshot went, or none will (or none was announced) */
    int ops; /* transport operations outstanding */
    hp_state st;
    bool began, ended, finished, detached;
    cinfer_usage usage;
    handoff_answer_fn cb;
    void *cb_ctx;
    double deadline, store_deadline;
    uint64_t bytes, win_bytes; /* record bytes and window-state bytes handed to the transport */
};

typedef struct hp_msg {
    handoff_push *p;
    uint8_t frame[XFER_FRAME_BYTES];
} hp_msg;

void handoff_prefill_params(gen_params *p) {
    p->n = 1;
    p->max_tokens = 1; /* the prompt is computed; the one sampled token is discarded */
    p->stream = false;
    p->include_usage = false;
    p->logprobs = false;
    p->top_logprobs = 0;
    p->min_tokens = 0;
    p->speculative = (cinfer_speculative){.drafter = CINFER_SPEC_OFF};
}

static void hp_abort_done(struct evhttp_request *req, void *arg) {
    (void)req;
    (void)arg;
}

/* Tells D over HTTP that this handoff will not arrive (the direct path is what failed), so a
 * step-2 request waiting there loads from the store at once instead of at --handoff-timeout. */
static void hp_notify_abort(handoff_push *p) {
    hp_peer *pe = p->peer;
    struct evhttp_uri *u = pe && pe->evcon ? evhttp_uri_parse(p->url) : NULL;
    const char *host = u ? evhttp_uri_get_host(u) : NULL;
    struct evhttp_request *req = host ? evhttp_request_new(hp_abort_done, NULL) : NULL;
    if (req) {
        struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
        evhttp_add_header(oh, "Host", host);
        evhttp_add_header(oh, "X-Cinfer-Handoff-Id", p->id_hex);
        evhttp_add_header(oh, "Content-Length", "0");
        if (p->auth[0]) evhttp_add_header(oh, "Authorization", p->auth);
        if (evhttp_make_request(pe->evcon, req, EVHTTP_REQ_POST, "/handoff/abort"))
            LOG_DEBUG("handoff %s: abort notice not sent", p->id_hex);
    }
    if (u) evhttp_uri_free(u);
}

static void hp_fail(handoff_push *p, const char *why) {
    if (p->st == HP_FAILED || p->st == HP_OK) return;
    hp_notify_abort(p);
    LOG_WARN("handoff %s: direct transfer to %s failed (%s); the blocks go through the store", p->id_hex, p->url, why);
    p->st = HP_FAILED;
    if (p->peer && p->peer->addr[0]) {
        xfer_drop_peer(p->m->node, p->peer->addr); /* outstanding operations fail; re-resolved next time */
        p->peer->addr[0] = 0;
    }
}

static void hp_op_done(void *ctx, int status) {
    hp_msg *msg = ctx;
    handoff_push *p = msg->p;
    p->ops--;
    if (status) hp_fail(p, "transport error");
    free(msg);
}

static void hp_flush_done(void *ctx, int status) {
    handoff_push *p = ctx;
    p->ops--;
    if (status) hp_fail(p, "flush failed");
    else if (p->st == HP_FLUSHING) p->st = HP_OK;
}

static int hp_send(handoff_push *p, uint16_t kind, uint32_t seq, uint32_t count, const void *data, size_t len) {
    hp_msg *msg = malloc(sizeof *msg);
    if (!msg) return hp_fail(p, "out of memory"), -1;
    msg->p = p;
    xfer_frame f = {.kind = kind, .seq = seq, .count = count, .data_len = len};
    memcpy(f.id, p->id, XFER_ID_BYTES);
    xfer_frame_encode(&f, msg->frame);
    cf_err err = {0};
    if (xfer_send(p->m->node, p->peer->addr, msg->frame, data, len, hp_op_done, msg, &err)) {
        free(msg);
        hp_fail(p, err.msg);
        return -1;
    }
    p->ops++;
    return 0;
}

/* ---- D's address: GET <url>/handoff/info ----
 * "ucx_address" (D's worker address) is preferred: UCX then picks from every transport the two
 * workers share, shared memory on one host; "listen" (through UCX's TCP connection manager) is
 * the fallback for a D that reports no worker address. */

static void hp_on_info(struct evhttp_request *req, void *arg) {
    hp_peer *pe = arg;
    pe->resolving = false;
    pe->failed = true;
    if (!req || evhttp_request_get_response_code(req) != 200) {
        LOG_WARN("handoff: GET %s/handoff/info failed (status %d)", pe->url,
                 req ? evhttp_request_get_response_code(req) : 0);
        return;
    }
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(b);
    const char *body = n ? (const char *)evbuffer_pullup(b, -1) : NULL;
    json_t *o = body && n < 65536 ? json_loadb(body, n, 0, NULL) : NULL;
    const char *l = json_string_value(json_object_get(o, "listen"));
    const char *wa = json_string_value(json_object_get(o, "ucx_address"));
    char host[96];
    uint16_t port;
    cf_err err = {0};
    const char *hid = json_string_value(json_object_get(o, "host_id"));
    json_int_t pid = json_integer_value(json_object_get(o, "pid"));
    json_int_t start = json_integer_value(json_object_get(o, "start_ticks"));
    pe->local = wa && hid && pe->m->host_id[0] && !pe->m->cfg.no_shm && !strcmp(hid, pe->m->host_id) && pid > 0 &&
                start >= 0 && xfer_process_alive((int64_t)pid, (uint64_t)start) == 1;
    pe->pid = pe->local ? (int64_t)pid : 0;
    pe->start_ticks = pe->local ? (uint64_t)start : 0;
    if (wa && strlen(wa) + 5 <= sizeof pe->addr && strspn(wa, "0123456789abcdef") == strlen(wa)) {
        /* one host: every transport, shared memory included, without UCX's peer-failure detection (our
         * liveness check: D's process, hp_tick); across hosts: the transports that detect a dead peer */
        snprintf(pe->addr, sizeof pe->addr, "%s:%s", pe->local ? "shm" : "ucx", wa);
        pe->failed = false;
    } else if (!l || xfer_parse_hostport(l, host, sizeof host, &port, &err) || port == 0) {
        LOG_WARN("handoff: %s/handoff/info: no usable \"listen\" address", pe->url);
    } else if (!strcmp(host, "0.0.0.0")) { /* listening everywhere: D's HTTP host reaches it */
        struct evhttp_uri *u = evhttp_uri_parse(pe->url);
        const char *h = u ? evhttp_uri_get_host(u) : NULL;
        if (h) {
            snprintf(pe->addr, sizeof pe->addr, "%s:%u", h, (unsigned)port);
            pe->failed = false;
        }
        if (u) evhttp_uri_free(u);
    } else {
        snprintf(pe->addr, sizeof pe->addr, "%s", l);
        pe->failed = false;
    }
    json_decref(o);
}

static void hp_resolve(handoff_mgr *m, handoff_push *p) {
    hp_peer *pe = m->peers;
    while (pe && strcmp(pe->url, p->url)) pe = pe->next;
    if (!pe) {
        if (!(pe = calloc(1, sizeof *pe))) return;
        snprintf(pe->url, sizeof pe->url, "%s", p->url);
        pe->m = m;
        pe->next = m->peers;
        m->peers = pe;
    }
    p->peer = pe;
    if (pe->addr[0] || pe->resolving) return;
    struct evhttp_uri *u = evhttp_uri_parse(p->url);
    const char *host = u ? evhttp_uri_get_host(u) : NULL;
    int port = u ? evhttp_uri_get_port(u) : -1;
    pe->failed = true;
    if (host && !pe->evcon) {
        pe->evcon = evhttp_connection_base_new(m->base, NULL, host, (uint16_t)(port > 0 ? port : 80));
        if (pe->evcon) evhttp_connection_set_timeout(pe->evcon, (int)(m->cfg.timeout_s + 1));
    }
    struct evhttp_request *req = pe->evcon ? evhttp_request_new(hp_on_info, pe) : NULL;
    if (req) {
        struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
        evhttp_add_header(oh, "Host", host);
        if (p->auth[0]) evhttp_add_header(oh, "Authorization", p->auth);
        if (evhttp_make_request(pe->evcon, req, EVHTTP_REQ_GET, "/handoff/info") == 0) {
            pe->resolving = true;
            pe->failed = false;
        }
    }
    if (u) evhttp_uri_free(u);
}

/* ---- the push ---- */

handoff_push *handoff_push_start(handoff_mgr *m, const handoff_req *h, gen_job *g, serve_error *e) {
    int32_t n = cinfer_engine_kv_handoff_blocks(m->engine, g->n_prompt);
    handoff_push *p = calloc(1, sizeof *p);
    if (!p || !(g->kv_export = cinfer_kv_export_new(m->engine, n))) {
        free(p);
        serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    p->x = g->kv_export; /* one reference for the job (gen_job_free), one for the push */
    cinfer_kv_export_ref(p->x);
    p->m = m;
    memcpy(p->id, h->id, XFER_ID_BYTES);
    snprintf(p->id_hex, sizeof p->id_hex, "%s", h->id_hex);
    snprintf(p->url, sizeof p->url, "%s", h->to);
    snprintf(p->auth, sizeof p->auth, "%s", h->auth);
    memcpy(p->begin.fingerprint, m->fingerprint, XFER_DIGEST_BYTES);
    hm_salt_digest(g->p.cache_salt, p->begin.salt_digest);
    p->begin.prompt_tokens = (uint32_t)g->n_prompt;
    p->begin.block_tokens = (uint32_t)m->block_tokens;
    p->begin.n_records = (uint32_t)n;
    p->begin.record_bytes = m->record_bytes;
    p->begin.window_bytes = n > 0 ? (uint32_t)m->window_bytes : 0; /* as the export's (cinfer_kv_export_window) */
    p->win_settled = p->begin.window_bytes == 0;
    xfer_begin_encode(&p->begin, p->begin_data);
    p->deadline = time_now() + m->cfg.timeout_s;
    p->next = m->pushes;
    m->pushes = p;
    if (!m->node) p->st = HP_FAILED; /* no transport here: the store carries it */
    else hp_resolve(m, p);
    hm_arm_tick(m);
    return p;
}

void handoff_push_finish(handoff_push *p, const cinfer_usage *u, handoff_answer_fn cb, void *ctx) {
    p->finished = true;
    p->usage = *u;
    p->cb = cb;
    p->cb_ctx = ctx;
    p->store_deadline = time_now() + HP_STORE_WAIT_S;
    hm_arm_tick(p->m);
}

void handoff_push_detach(handoff_push *p) {
    p->detached = true;
    p->cb = NULL;
    if (p->began && !p->ended && p->st == HP_SENDING) {
        p->ended = true;
        hp_send(p, XFER_MSG_ABORT, 0, 0, NULL, 0); /* D stops waiting */
    }
    if (p->st != HP_OK) p->st = HP_FAILED;
    hm_arm_tick(p->m);
}

/* SENDING: BEGIN, new records, then END + flush once the prefill finished. */
static void hp_pump(handoff_push *p) {
    if (!p->began) {
        p->began = true;
        if (hp_send(p, XFER_MSG_BEGIN, 0, 0, p->begin_data, XFER_BEGIN_BYTES)) return;
    }
    int32_t ready = cinfer_kv_export_ready(p->x);
    if (ready > p->sent) {
        size_t rec = p->m->record_bytes, len = (size_t)(ready - p->sent) * rec;
        if (hp_send(p, XFER_MSG_RECORDS, (uint32_t)p->sent, (uint32_t)(ready - p->sent),
                    cinfer_kv_export_record(p->x, p->sent), len))
            return;
        p->bytes += len;
        p->sent = ready;
    }
    if (!p->win_settled && (uint32_t)p->sent == p->begin.n_records) {
        const uint8_t *win = NULL;
        int w = cinfer_kv_export_window(p->x, &win);
        if (w == 1) {
            if (hp_send(p, XFER_MSG_WINDOW, p->begin.n_records, 0, win, p->begin.window_bytes)) return;
            p->win_sent = 1;
            p->win_bytes = p->begin.window_bytes;
        }
        p->win_settled = w != 0; /* -1: none will come (END says so; D computes the prompt) */
    }
    if (!p->finished || p->ended || (!p->win_settled && (uint32_t)p->sent == p->begin.n_records)) return;
    p->ended = true;
    if ((uint32_t)p->sent != p->begin.n_records) { /* the engine stopped short: D must not wait for the rest */
        hp_send(p, XFER_MSG_ABORT, 0, 0, NULL, 0);
        hp_fail(p, "fewer blocks computed than announced");
        return;
    }
    cf_err err = {0};
    if (hp_send(p, XFER_MSG_END, p->win_sent, (uint32_t)p->sent, NULL, 0)) return;
    if (xfer_flush(p->m->node, p->peer->addr, hp_flush_done, p, &err)) return hp_fail(p, err.msg);
    p->ops++;
    p->st = HP_FLUSHING;
}

static void hp_answer(handoff_push *p, bool store) {
    handoff_answer_fn cb = p->cb;
    p->cb = NULL;
    const char *link = store || !p->peer ? NULL : p->peer->local ? "shm" : "net";
    json_t *o = json_pack("{s:s, s:i, s:i, s:s, s:s?, s:I, s:I}", "handoff_id", p->id_hex, "prompt_tokens",
                          (int)p->usage.prompt_tokens, "cached_tokens", (int)p->usage.cached_tokens, "transport",
                          store ? "store" : "ucx", "link", link, "bytes", (json_int_t)(store ? 0 : p->bytes),
                          "window_bytes", (json_int_t)(store ? 0 : p->win_bytes));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    cb(p->cb_ctx, s ? 200 : 500, s);
}

/* One push, one tick: advance, answer when due. True when it can be freed. */
static bool hp_tick(handoff_push *p, double now) {
    if (!p->peer && p->st == HP_RESOLVING) hp_fail(p, "out of memory");
    if (p->st == HP_RESOLVING || (p->st == HP_SENDING && !p->peer->addr[0])) {
        if (p->peer->addr[0]) p->st = HP_SENDING;
        else if (!p->peer->resolving) hp_fail(p, "no handoff address (GET /handoff/info)");
    }
    if (p->st == HP_SENDING && !p->detached) hp_pump(p);
    if ((p->st == HP_SENDING || p->st == HP_FLUSHING) && p->peer->local && now - p->peer->probed >= HP_PROBE_S) {
        p->peer->probed = now; /* shared memory reports no dead peer: UCX would wait for it forever */
        if (xfer_process_alive(p->peer->pid, p->peer->start_ticks) == 0) hp_fail(p, "the decode worker exited");
    }
    if ((p->st == HP_RESOLVING || p->st == HP_SENDING || p->st == HP_FLUSHING) && now > p->deadline)
        hp_fail(p, "timed out");
    if (p->cb && p->finished && p->st == HP_OK) hp_answer(p, false);
    if (p->cb && p->finished && p->st == HP_FAILED) {
        cinfer_engine_stats st = cinfer_engine_get_stats(p->m->engine);
        if (!st.store.enabled || st.store.writes_in_flight <= 0 || now > p->store_deadline) hp_answer(p, true);
    }
    return (p->st == HP_OK || p->st == HP_FAILED) && !p->cb && (p->finished || p->detached) && p->ops == 0;
}

bool hp_tick_all(handoff_mgr *m, double now) {
    bool busy = false;
    for (handoff_push **pp = &m->pushes; *pp;) {
        handoff_push *p = *pp;
        if (hp_tick(p, now)) {
            *pp = p->next;
            cinfer_kv_export_unref(p->x);
            free(p);
        } else {
            busy = true;
            pp = &p->next;
        }
    }
    return busy;
}

void hp_close_all(handoff_mgr *m) {
    for (handoff_push *p = m->pushes; p; p = p->next) p->cb = NULL; /* the server answers no one any more */
    if (m->node) {
        for (hp_peer *pe = m->peers; pe; pe = pe->next)
            if (pe->addr[0]) xfer_drop_peer(m->node, pe->addr);
        xfer_progress(m->node); /* outstanding operations complete (with errors) */
    }
    while (m->pushes) {
        handoff_push *p = m->pushes;
        m->pushes = p->next;
        if (p->ops > 0) LOG_WARN("handoff %s: %d transfers abandoned at shutdown", p->id_hex, p->ops);
        cinfer_kv_export_unref(p->x);
        free(p);
    }
    while (m->peers) {
        hp_peer *pe = m->peers;
        m->peers = pe->next;
        if (pe->evcon) evhttp_connection_free(pe->evcon);
        free(pe);
    }
}
