/* handoff.c - see handoff.h. Owns the manager (the UCX node, its fd event
 * and the 1 ms tick), GET /handoff/info, the handoff request headers and the
 * decode side: a table of handoffs being received (hd_entry), each filled by
 * BEGIN / RECORDS / WINDOW / END messages (checked by xfer_wire.h, then
 * against this worker's geometry; a window model's WINDOW snapshot lands right
 * after the records in the same buffer and goes to the engine with them),
 * waited for by at most one parked job and consumed by
 * handoff_claim. An entry's records buffer is a run of the receive-buffer
 * pool (xfer_pool.h: bounded, recycled, so its pages are warm), taken at
 * BEGIN or, when the pool is full, at its first RECORDS: until then xfer's
 * delivery waits (XFER_PLACE_LATER, back-pressure through the transport).
 * RECORDS land straight in that buffer (xfer's placement: no per-message
 * allocation; large messages with no copy); a claim moves the buffer to the
 * engine, which gives it back to the pool once it is copied into KV blocks
 * (cinfer_request.kv_import_release). An entry that goes away while receives
 * are in flight waits on the zombie list until UCX has finished with its
 * buffer. Bounds: at most HD_MAX_ENTRIES handoffs and cfg.max_bytes of
 * records (the pool); an unclaimed handoff is dropped after HD_TTL_FACTOR x
 * the timeout (at least HD_TTL_MIN_S). The prefill side is handoff_push.c. */
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "serve/handoff_internal.h"

#define HD_MAX_ENTRIES 4096
#define HD_TTL_FACTOR 4
#define HD_TTL_MIN_S 30.0

int handoff_role_parse(const char *s) {
    if (!strcmp(s, "both")) return HANDOFF_ROLE_BOTH;
    if (!strcmp(s, "prefill")) return HANDOFF_ROLE_PREFILL;
    if (!strcmp(s, "decode")) return HANDOFF_ROLE_DECODE;
    return -1;
}

const char *handoff_role_name(handoff_role r) {
    return r == HANDOFF_ROLE_PREFILL ? "prefill" : r == HANDOFF_ROLE_DECODE ? "decode" : "both";
}

void hm_salt_digest(const char *salt, uint8_t out[XFER_DIGEST_BYTES]) {
    unsigned int len = 0;
    if (!EVP_Digest(salt ? salt : "", salt ? strlen(salt) : 0, out, &len, EVP_sha256(), NULL))
        memset(out, 0, XFER_DIGEST_BYTES);
}

static hd_entry *hd_find(handoff_mgr *m, const uint8_t id[XFER_ID_BYTES]) {
    for (hd_entry *e = m->entries; e; e = e->next)
        if (!memcmp(e->id, id, XFER_ID_BYTES)) return e;
    return NULL;
}

static hd_entry *hd_get(handoff_mgr *m, const uint8_t id[XFER_ID_BYTES]) {
    hd_entry *e = hd_find(m, id);
    if (e || m->n_entries >= HD_MAX_ENTRIES || !(e = calloc(1, sizeof *e))) return e;
    memcpy(e->id, id, XFER_ID_BYTES);
    e->created = time_now();
    e->next = m->entries;
    m->entries = e;
    m->n_entries++;
    return e;
}

static void hd_destroy(handoff_mgr *m, hd_entry *e) {
    if (e->records) xfer_pool_put(m->pool, e->records);
    free(e->have);
    free(e);
}

/* Takes e out of the table; freed now, or once the receives placed into its records have finished. */
static void hd_free(handoff_mgr *m, hd_entry *e) {
    for (hd_entry **pp = &m->entries; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    m->n_entries--;
    if (e->placing == 0) return hd_destroy(m, e);
    e->unlinked = true;
    e->cb = NULL;
    e->next = m->zombies;
    m->zombies = e;
}

static bool hd_settled(const hd_entry *e) {
    return e->aborted || (e->begun && e->ended && e->n_have >= e->n_end && e->n_end == e->begin.n_records &&
                          (!e->win_end || e->win_have));
}

/* Pool units (records) of a begun entry's buffer: its records, then room for its window snapshot. */
static uint64_t hd_units(const handoff_mgr *m, const xfer_begin *b) {
    return (uint64_t)b->n_records + ((uint64_t)b->window_bytes + m->record_bytes - 1) / m->record_bytes;
}

/* Where a begun entry's WINDOW snapshot lands: right after its records. */
static uint8_t *hd_window_at(const hd_entry *e) {
    return e->records + (uint64_t)e->begin.n_records * e->begin.record_bytes;
}

/* A parked job stops waiting (the handoff settled or timed out). */
static void hd_wake(hd_entry *e) {
    handoff_ready_fn cb = e->cb;
    e->cb = NULL;
    if (cb) cb(e->cb_ctx);
}

static void hd_abort(hd_entry *e, const char *why) {
    char hex[2 * XFER_ID_BYTES + 1];
    xfer_id_hex(e->id, hex);
    LOG_WARN("handoff %s: %s", hex, why);
    e->aborted = true;
}

/* Gives a begun entry its receive buffer when the pool has room; false while it waits for one. */
static bool hd_reserve(handoff_mgr *m, hd_entry *e) {
    if (e->records || !e->begun || e->begin.n_records == 0) return true;
    if ((e->records = xfer_pool_get(m->pool, hd_units(m, &e->begin)))) return true;
    if (!e->waited) m->waited_handoffs++;
    e->waited = true;
    return false;
}

static void hd_begin(handoff_mgr *m, hd_entry *e, const uint8_t *data, uint64_t len) {
    cf_err err = {0};
    xfer_begin b;
    if (e->begun) return hd_abort(e, "a second BEGIN");
    if (xfer_begin_decode(data, (size_t)len, &b, &err)) return hd_abort(e, err.msg);
    if (b.record_bytes != m->record_bytes || b.block_tokens != (uint32_t)m->block_tokens ||
        memcmp(b.fingerprint, m->fingerprint, XFER_DIGEST_BYTES))
        return hd_abort(e, "from a worker with another model, KV layout or block size");
    if (b.window_bytes && b.window_bytes != m->window_bytes)
        return hd_abort(e, "a window state of another size (window-state tier off here, or another geometry)");
    if (b.n_records && (!m->pool || !xfer_pool_fits(m->pool, hd_units(m, &b))))
        return hd_abort(e, "larger than the receive-buffer pool, --handoff-pool-bytes (records are computed instead)");
    if (b.n_records && !(e->have = calloc(b.n_records, 1))) return hd_abort(e, "out of memory");
    e->begin = b;
    e->begun = true;
    hd_reserve(m, e); /* the pool is full: the first RECORDS waits for a buffer */
}

static void hd_mark(hd_entry *e, const xfer_frame *f) {
    for (uint32_t i = f->seq; i < f->seq + f->count; i++)
        if (!e->have[i]) {
            e->have[i] = 1;
            e->n_have++;
        }
}

/* RECORDS that were not placed (they came before BEGIN, or do not fit it): checked, copied in. */
static void hd_records(hd_entry *e, const xfer_frame *f, const uint8_t *data) {
    cf_err err = {0};
    if (!e->begun) return hd_abort(e, "records before BEGIN");
    if (xfer_records_check(f, &e->begin, &err)) return hd_abort(e, err.msg);
    if (!e->records) return hd_abort(e, "no receive buffer (closing)");
    memcpy(e->records + (uint64_t)f->seq * e->begin.record_bytes, data, (size_t)f->data_len);
    hd_mark(e, f);
}

/* A WINDOW that was not placed: checked, copied in after the records. */
static void hd_window(hd_entry *e, const xfer_frame *f, const uint8_t *data) {
    cf_err err = {0};
    if (!e->begun) return hd_abort(e, "window state before BEGIN");
    if (xfer_window_check(f, &e->begin, &err)) return hd_abort(e, err.msg);
    if (!e->records) return hd_abort(e, "no receive buffer (closing)");
    if (e->win_have) return hd_abort(e, "a second WINDOW");
    memcpy(hd_window_at(e), data, (size_t)f->data_len);
    e->win_have = true;
}

/* xfer's on_message: one checked frame (data owned here). */
static void hm_on_message(void *ctx, const xfer_frame *f, uint8_t *data) {
    handoff_mgr *m = ctx;
    hd_entry *e = hd_get(m, f->id);
    if (e && !e->aborted) {
        if (f->kind == XFER_MSG_BEGIN) hd_begin(m, e, data, f->data_len);
        else if (f->kind == XFER_MSG_RECORDS) hd_records(e, f, data);
        else if (f->kind == XFER_MSG_WINDOW) hd_window(e, f, data);
        else if (f->kind == XFER_MSG_END) {
            e->ended = true;
            e->n_end = f->count;
            e->win_end = f->seq;
            if (e->begun && (f->count != e->begin.n_records || (f->seq && !e->begin.window_bytes)))
                hd_abort(e, "END disagrees with BEGIN");
        } else if (f->kind == XFER_MSG_ABORT) e->aborted = true;
    }
    free(data);
    if (e && hd_settled(e)) hd_wake(e);
}

/* xfer's place: RECORDS of a begun handoff that fit it go straight into its records buffer; while the
 * pool has no buffer for it, later (delivery waits: back-pressure). Anything else: on_message. */
static xfer_place_result hm_place(void *ctx, const xfer_frame *f, uint8_t **dst, void **token) {
    handoff_mgr *m = ctx;
    bool win = f->kind == XFER_MSG_WINDOW;
    hd_entry *e = f->kind == XFER_MSG_RECORDS || win ? hd_find(m, f->id) : NULL;
    cf_err err = {0};
    if (!e || !m->pool || e->aborted || !e->begun || (win && e->win_have) ||
        (win ? xfer_window_check(f, &e->begin, &err) : xfer_records_check(f, &e->begin, &err)))
        return XFER_PLACE_NONE;
    if (!hd_reserve(m, e)) return XFER_PLACE_LATER;
    e->placing++;
    *token = e;
    *dst = win ? hd_window_at(e) : e->records + (uint64_t)f->seq * e->begin.record_bytes;
    return XFER_PLACE_HERE;
}

static void hm_on_placed(void *ctx, const xfer_frame *f, void *token, int status) {
    handoff_mgr *m = ctx;
    hd_entry *e = token;
    e->placing--;
    if (e->unlinked) {
        if (e->placing > 0) return;
        for (hd_entry **pp = &m->zombies; *pp; pp = &(*pp)->next)
            if (*pp == e) {
                *pp = e->next;
                break;
            }
        return hd_destroy(m, e);
    }
    if (e->aborted) return;
    if (status) hd_abort(e, "a records transfer failed");
    else if (f->kind == XFER_MSG_WINDOW) e->win_have = true;
    else hd_mark(e, f);
    if (hd_settled(e)) hd_wake(e);
}

/* Expires parked waits and unclaimed handoffs; true while a job is parked. */
static bool hd_tick(handoff_mgr *m, double now) {
    bool parked = false;
    double ttl = m->cfg.timeout_s * HD_TTL_FACTOR > HD_TTL_MIN_S ? m->cfg.timeout_s * HD_TTL_FACTOR : HD_TTL_MIN_S;
    for (hd_entry *e = m->entries, *n; e; e = n) {
        n = e->next;
        if (e->cb && now >= e->deadline) hd_wake(e); /* may claim (free) e: n was read first */
        else if (e->cb) parked = true;
        else if (now - e->created > ttl) hd_free(m, e);
    }
    return parked;
}

static void hm_tick(evutil_socket_t fd, short what, void *arg) {
    handoff_mgr *m = arg;
    (void)fd;
    (void)what;
    m->ticking = false;
    if (m->node) xfer_progress(m->node);
    double now = time_now();
    bool busy = hp_tick_all(m, now);
    busy |= hd_tick(m, now);
    if (busy || (m->node && (xfer_pending(m->node) > 0 || xfer_stalled(m->node))))
        hm_arm_tick(m); /* stalled: a buffer given back by the engine is noticed at the next tick */
}

void hm_arm_tick(handoff_mgr *m) {
    static const struct timeval ms = {0, 1000};
    if (m->ticking) return;
    m->ticking = true;
    evtimer_add(m->ev_tick, &ms);
}

static void hm_on_fd(evutil_socket_t fd, short what, void *arg) {
    handoff_mgr *m = arg;
    (void)fd;
    (void)what;
    xfer_progress(m->node);
    hm_arm_tick(m); /* completions may have moved pushes and waits on */
}

static int hm_open_node(handoff_mgr *m, cf_err *err) {
    char listen[128];
    const char *l = m->cfg.listen;
    if (!l && m->cfg.role == HANDOFF_ROLE_DECODE) {
        snprintf(listen, sizeof listen, "%s:0", m->cfg.http_host ? m->cfg.http_host : "127.0.0.1");
        l = listen;
    }
    if (!l && m->cfg.role == HANDOFF_ROLE_BOTH) return 0; /* today's server: no transport */
    if (m->cfg.role != HANDOFF_ROLE_PREFILL &&
        xfer_pool_new(m->record_bytes, (uint64_t)m->cfg.max_bytes, HD_MAX_ENTRIES, m->cfg.pool_prefault, &m->pool, err))
        return -1;
    xfer_config xc = {.listen = m->cfg.role == HANDOFF_ROLE_PREFILL ? NULL : l,
                      .max_message = (uint64_t)m->cfg.max_bytes,
                      .on_message = hm_on_message,
                      .place = hm_place,
                      .on_placed = hm_on_placed,
                      .ctx = m};
    if (xfer_open(&xc, &m->node, err)) return -1;
    m->ev_fd = event_new(m->base, xfer_fd(m->node), EV_READ | EV_PERSIST, hm_on_fd, m);
    if (!m->ev_fd || event_add(m->ev_fd, NULL)) return cf_fail(err, "handoff: cannot watch the UCX fd");
    if (xfer_listen_addr(m->node)) LOG_INFO("handoff: accepting KV handoffs on %s (UCX)", xfer_listen_addr(m->node));
    return 0;
}

int handoff_open(const handoff_config *c, struct event_base *base, cinfer_engine *e, handoff_mgr **out, cf_err *err) {
    handoff_mgr *m = calloc(1, sizeof *m);
    if (!m) return cf_fail(err, "out of memory");
    *out = m;
    m->cfg = *c;
    if (m->cfg.max_bytes <= 0) m->cfg.max_bytes = (int64_t)1 << 30;
    if (m->cfg.timeout_s <= 0) m->cfg.timeout_s = 5;
    m->base = base;
    m->engine = e;
    cinfer_engine_kv_fingerprint(e, m->fingerprint);
    m->record_bytes = cinfer_engine_kv_record_bytes(e);
    m->window_bytes = cinfer_engine_kv_window_bytes(e);
    if (m->window_bytes > XFER_MAX_WINDOW_BYTES) { /* the wire's bound: such a model's handoffs are computed */
        LOG_WARN("handoff: window-state snapshots of %zu bytes exceed the wire's %u; window state is not handed off",
                 m->window_bytes, XFER_MAX_WINDOW_BYTES);
        m->window_bytes = 0;
    }
    m->block_tokens = cinfer_engine_block_tokens(e);
    if (xfer_host_id(m->host_id, sizeof m->host_id) || xfer_process_self(&m->pid, &m->start_ticks))
        m->host_id[0] = 0; /* cannot tell: every peer counts as remote */
    m->ev_tick = evtimer_new(base, hm_tick, m);
    if (!m->ev_tick) return cf_fail(err, "out of memory");
    return hm_open_node(m, err);
}

void handoff_close(handoff_mgr *m) {
    if (!m) return;
    hp_close_all(m);
    if (m->ev_fd) event_free(m->ev_fd);
    xfer_close(m->node); /* reports every placed receive: no zombie is left after it */
    m->node = NULL;
    while (m->entries) {
        hd_wake(m->entries); /* a parked job is served without its handoff */
        if (m->entries) hd_free(m, m->entries);
    }
    xfer_pool_free(m->pool); /* now, or when the engine gives the last claimed buffer back */
    if (m->ev_tick) event_free(m->ev_tick);
    free(m);
}

char *handoff_info_json(handoff_mgr *m) {
    const char *l = m->node ? xfer_listen_addr(m->node) : NULL;
    if (!l) return NULL;
    const char *wa = xfer_worker_address(m->node);
    json_t *o = json_pack("{s:s, s:s?, s:s, s:s, s:I}", "listen", l, "ucx_address", wa, "transport", "ucx", "role",
                          handoff_role_name(m->cfg.role), "record_bytes", (json_int_t)m->record_bytes);
    if (o && m->host_id[0] && !m->cfg.no_shm && /* a prefill worker of this host may use shared memory */
        (json_object_set_new(o, "host_id", json_string(m->host_id)) ||
         json_object_set_new(o, "pid", json_integer((json_int_t)m->pid)) ||
         json_object_set_new(o, "start_ticks", json_integer((json_int_t)m->start_ticks)))) {
        json_decref(o);
        o = NULL;
    }
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

int handoff_metrics(void *ctx, char **out, size_t *len) {
    handoff_mgr *m = ctx;
    xfer_rx_stats rx = {0};
    xfer_pool_stats ps = {0};
    if (m->node) xfer_get_rx_stats(m->node, &rx);
    if (m->pool) xfer_pool_get_stats(m->pool, &ps);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return -1;
    fprintf(f,
            "# HELP cinfer_handoff_received_bytes_total Handoff bytes received, by how they reached their buffer: "
            "placed (pulled straight into the receive buffer), copied (a bounce through an intermediate buffer), "
            "unplaced (not a receive buffer's: refused or unmatched messages).\n"
            "# TYPE cinfer_handoff_received_bytes_total counter\n"
            "cinfer_handoff_received_bytes_total{path=\"placed\"} %llu\n"
            "cinfer_handoff_received_bytes_total{path=\"copied\"} %llu\n"
            "cinfer_handoff_received_bytes_total{path=\"unplaced\"} %llu\n",
            (unsigned long long)rx.pulled_bytes, (unsigned long long)(rx.copied_bytes + m->claim_copied_bytes),
            (unsigned long long)rx.unplaced_bytes);
    fprintf(f,
            "# HELP cinfer_handoff_pool_bytes The decode worker's receive-buffer pool: capacity, in use now, most in "
            "use at once.\n"
            "# TYPE cinfer_handoff_pool_bytes gauge\n"
            "cinfer_handoff_pool_bytes{state=\"capacity\"} %llu\n"
            "cinfer_handoff_pool_bytes{state=\"used\"} %llu\n"
            "cinfer_handoff_pool_bytes{state=\"high_water\"} %llu\n"
            "# HELP cinfer_handoff_pool_waits_total Handoffs that found the receive-buffer pool full and waited "
            "(back-pressure).\n"
            "# TYPE cinfer_handoff_pool_waits_total counter\n"
            "cinfer_handoff_pool_waits_total %llu\n"
            "# HELP cinfer_handoff_receive_stalls_total Times delivery of received handoff messages stopped for a "
            "receive buffer.\n"
            "# TYPE cinfer_handoff_receive_stalls_total counter\n"
            "cinfer_handoff_receive_stalls_total %llu\n",
            (unsigned long long)ps.capacity_bytes, (unsigned long long)ps.used_bytes,
            (unsigned long long)ps.high_water_bytes, (unsigned long long)m->waited_handoffs,
            (unsigned long long)rx.stalls);
    if (fclose(f) || !buf) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

int handoff_read_headers(const handoff_mgr *m, struct evhttp_request *req, handoff_req *h, serve_error *e) {
    memset(h, 0, sizeof *h);
    struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
    const char *id = evhttp_find_header(ih, "X-Cinfer-Handoff-Id"), *to = evhttp_find_header(ih, "X-Cinfer-Handoff-To");
    if (!id && !to) return 0;
    if (!id || xfer_id_parse(id, h->id))
        return serve_bad(e, NULL,
                         "X-Cinfer-Handoff-Id must be 32 hex digits (and is required with X-Cinfer-Handoff-To)");
    xfer_id_hex(h->id, h->id_hex);
    h->present = true;
    if (!to) return 0;
    if (m->cfg.role == HANDOFF_ROLE_DECODE)
        return serve_bad(e, NULL, "this worker has --role decode: it does not prefill for another worker");
    if (strncmp(to, "http://", 7) || strlen(to) >= sizeof h->to)
        return serve_bad(e, NULL, "X-Cinfer-Handoff-To must be an http:// base URL under %zu bytes", sizeof h->to);
    snprintf(h->to, sizeof h->to, "%s", to);
    size_t n = strlen(h->to);
    while (n > 7 && h->to[n - 1] == '/') h->to[--n] = 0;
    const char *auth = evhttp_find_header(ih, "Authorization");
    if (auth && strlen(auth) < sizeof h->auth) snprintf(h->auth, sizeof h->auth, "%s", auth);
    h->to_present = true;
    return 0;
}

bool handoff_wait(handoff_mgr *m, const uint8_t id[XFER_ID_BYTES], handoff_ready_fn cb, void *ctx) {
    if (!m->node || !xfer_listen_addr(m->node)) return false; /* nothing can arrive */
    hd_entry *e = hd_get(m, id);
    if (!e || e->cb || hd_settled(e)) return false; /* full table, a second waiter (served alone), or ready */
    e->cb = cb;
    e->cb_ctx = ctx;
    e->deadline = time_now() + m->cfg.timeout_s;
    hm_arm_tick(m);
    return true;
}

void handoff_abort(handoff_mgr *m, const uint8_t id[XFER_ID_BYTES]) {
    hd_entry *e = hd_get(m, id);
    if (!e) return;
    e->aborted = true;
    hd_wake(e);
}

void handoff_claim(handoff_mgr *m, const uint8_t id[XFER_ID_BYTES], gen_job *g) {
    hd_entry *e = hd_find(m, id);
    if (!e) return;
    uint8_t salt[XFER_DIGEST_BYTES];
    hm_salt_digest(g->p.cache_salt, salt);
    uint32_t k = 0;
    while (e->begun && k < e->begin.n_records && e->have[k]) k++; /* the contiguous head that arrived */
    if (e->begun && !e->aborted && k > 0 && e->begin.prompt_tokens == (uint32_t)g->n_prompt &&
        !memcmp(e->begin.salt_digest, salt, XFER_DIGEST_BYTES) && !g->kv_import) {
        /* the window snapshot sits at the end of all the records: only with every record */
        size_t recs = (size_t)k * e->begin.record_bytes,
               win = e->win_have && k == e->begin.n_records ? e->begin.window_bytes : 0;
        if (e->placing == 0) { /* moved: the engine verifies each record, then gives the buffer back */
            g->kv_import = e->records;
            g->kv_import_release = xfer_pool_release;
            g->kv_import_owner = m->pool;
            e->records = NULL;
        } else if ((g->kv_import = malloc(recs + win))) { /* UCX still writes past them */
            memcpy(g->kv_import, e->records, recs);
            if (win) memcpy((uint8_t *)g->kv_import + recs, hd_window_at(e), win);
            g->kv_import_release = NULL;
            m->claim_copied_bytes += recs + win;
        }
        g->n_kv_import = g->kv_import ? (int32_t)k : 0;
        g->kv_import_window = g->kv_import && win ? (uint8_t *)g->kv_import + recs : NULL;
        g->kv_import_window_bytes = g->kv_import_window ? win : 0;
    } else if (e->begun && !e->aborted && k > 0) {
        char hex[2 * XFER_ID_BYTES + 1];
        xfer_id_hex(id, hex);
        LOG_WARN("handoff %s: does not match the request (prompt or tenant differ); computing instead", hex);
    }
    hd_free(m, e);
}
