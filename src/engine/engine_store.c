/* engine_store.c - see engine_store.h. Owns the store handle, the per-pool-
 * block "known stored" keys (so a block is written once per content), the
 * count of requests waiting for a load, and the completion scratch. Runs on
 * the engine thread only; the notify callback is the one entry point from the
 * store's threads. */
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "engine/engine_internal.h"
#include "engine/engine_swa_store.h"
#include "store/store.h"
#include "store/store_fs.h"

/* The store sits below the engine and has its own traffic classes and
 * counters; these are the same numbers under the public names. */
_Static_assert(CINFER_TRAFFIC_N == STORE_N_CLASSES && (int)CINFER_TRAFFIC_DEFAULT == (int)STORE_CLASS_DEFAULT &&
                   (int)CINFER_TRAFFIC_CHAT == (int)STORE_CLASS_CHAT &&
                   (int)CINFER_TRAFFIC_AGENT == (int)STORE_CLASS_AGENT,
               "traffic classes: cinfer/engine.h and store/store_format.h disagree");
_Static_assert(CINFER_STORE_LATENCY_BUCKETS == STORE_LATENCY_BUCKETS, "store latency buckets differ");

static void es_public_stats(const store_stats *s, cinfer_store_stats *o) {
    o->enabled = s->enabled;
    o->writable = s->writable;
    o->lookups = s->lookups;
    o->hit_blocks = s->hit_blocks;
    o->hit_tokens = s->hit_tokens;
    o->miss_blocks = s->miss_blocks;
    o->expired = s->expired;
    o->quarantined = s->quarantined;
    o->read_errors = s->read_errors;
    o->write_errors = s->write_errors;
    o->bytes_read = s->bytes_read;
    o->bytes_written = s->bytes_written;
    o->objects_written = s->objects_written;
    o->writes_skipped = s->writes_skipped;
    o->writes_dropped = s->writes_dropped;
    o->writes_in_flight = s->writes_in_flight;
    o->degraded = s->degraded;
    o->gc_runs = s->gc_runs;
    o->gc_deleted_expired = s->gc_deleted_expired;
    o->gc_deleted_lru = s->gc_deleted_lru;
    o->loads = s->loads;
    o->load_seconds = s->load_seconds;
    memcpy(o->load_latency, s->load_latency, sizeof o->load_latency);
}

#define ES_EVENTS 64
#define ES_MAX_LOOKUPS 2 /* per request: first admission and one readmission after preemption */

typedef struct eng_store {
    store *s; /* NULL: configured but unusable (degraded at open) */
    int32_t bt, n_blocks;
    uint8_t (*known)[PREFIX_KEY_BYTES]; /* per pool block: a key published (or queued) with its contents */
    uint8_t *has_known;
    int32_t *held; /* per pool block: references the adapter holds (queued writes, load destinations) */
    int32_t n_loading;
    double load_timeout_s;
    uint64_t timeouts;
    store_event ev[ES_EVENTS];
    /* loads whose destination blocks were allocated while a forward pass was in flight: submitted once that
     * step is over (a block freed during the step - a cancelled or preempted request's - may still be
     * written by it, and the I/O thread must not write the same block concurrently) */
    store_chain **deferred;
    const void **deferred_step; /* e->inflight when each was deferred */
    int32_t n_deferred, cap_deferred;
} eng_store;

/* The KV layout as the store describes it: 4 numbers per layer group (kind, layers, floats per row,
 * window or tokens per row; from the layout of the engine's KV element type) and the model's fingerprint.
 * The element type's name joins them in the fingerprint, so objects and handoffs of one --kv-dtype are
 * never loaded by an engine of another. Returns the number of descriptor entries, or -1. */
static int eng_kv_layout(cinfer_engine *e, int32_t desc[4 * KV_SPEC_MAX_GROUPS], uint8_t model_fp[PREFIX_KEY_BYTES],
                         cf_err *err) {
    kv_spec spec;
    if (kv_spec_from_model_as(e->m, e->kv_dt, &spec, err) || prefix_cache_model_fingerprint(e->m, model_fp, err))
        return -1;
    for (int g = 0; g < spec.n_groups; g++) {
        desc[4 * g] = (int32_t)spec.groups[g].kind;
        desc[4 * g + 1] = spec.groups[g].n_layers;
        desc[4 * g + 2] = spec.groups[g].token_floats;
        desc[4 * g + 3] = spec.groups[g].kind == KV_LAYER_WINDOW ? spec.groups[g].window : spec.groups[g].row_tokens;
    }
    return 4 * spec.n_groups;
}

int eng_kv_fingerprint(cinfer_engine *e, uint8_t out[PREFIX_KEY_BYTES], cf_err *err) {
    int32_t desc[4 * KV_SPEC_MAX_GROUPS];
    uint8_t model_fp[PREFIX_KEY_BYTES];
    int n_desc = eng_kv_layout(e, desc, model_fp, err);
    if (n_desc < 0) return -1;
    return store_fingerprint(model_fp, (uint32_t)e->opt.block_tokens, desc, n_desc, kv_dtype_name(e->kv_dt), out, err);
}

static void es_notify(void *ctx) {
    cinfer_engine *e = ctx;
    pthread_mutex_lock(&e->mu);
    e->store_wake = true;
    pthread_cond_signal(&e->work_cv);
    pthread_mutex_unlock(&e->mu);
}

static prefix_salt es_salt(const eng_req *r) { return (prefix_salt){.bytes = r->salt, .len = r->salt_len}; }

int eng_store_open(cinfer_engine *e, cf_err *err) {
    const cinfer_engine_options *o = &e->opt;
    if (!o->kv_store_dir || !o->kv_store_dir[0]) return 0;
    eng_store *es = calloc(1, sizeof *es);
    if (!es) return cf_fail(err, "engine: out of memory for the store");
    e->es = es;
    es->bt = o->block_tokens;
    es->n_blocks = kv_pool_n_blocks(e->kv);
    es->load_timeout_s = (o->kv_store_load_timeout_ms > 0 ? o->kv_store_load_timeout_ms : 2000) / 1e3;
    es->known = malloc((size_t)es->n_blocks * PREFIX_KEY_BYTES);
    es->has_known = calloc((size_t)es->n_blocks, 1);
    es->held = calloc((size_t)es->n_blocks, sizeof *es->held);
    if (!es->known || !es->has_known || !es->held) return cf_fail(err, "engine: out of memory for the store");
    store_config c = {
        .dir = o->kv_store_dir,
        .block_tokens = (uint32_t)es->bt,
        .payload_bytes = (uint64_t)kv_pool_block_floats(e->kv) * sizeof(float),
        .quota_bytes = o->kv_store_quota_bytes,
        .sync = o->kv_store_sync,
        .gc_interval_s = o->kv_store_gc_interval_s,
        .notify = es_notify,
        .notify_ctx = e,
    };
    memcpy(c.retention_s, o->kv_store_retention_s, sizeof c.retention_s);
    c.close_timeout_ms = o->kv_store_close_timeout_ms;
    /* A queued write pins its block; blocks being written mostly belong to running requests anyway, so the
     * cap only matters when the disk falls behind: then at most half the pool is pinned by write-back. */
    c.write_slots = es->n_blocks / 2 < 4096 ? (es->n_blocks / 2 > 0 ? es->n_blocks / 2 : 1) : 4096;
    cf_err se = {0};
    memcpy(c.fingerprint, e->kv_fp, sizeof c.fingerprint);
    store_mac_key *key = NULL;
    if (o->kv_store_key_file && o->kv_store_key_file[0]) {
        /* fail closed: a configured key that cannot be used must not silently turn authentication off */
        if (!(key = malloc(sizeof *key))) return cf_fail(err, "engine: out of memory for the store key");
        if (store_key_load(o->kv_store_key_file, key, &se)) {
            free(key);
            return cf_fail(err, "%s", se.msg);
        }
        c.mac_key = key;
    }
    int rc = store_open(&c, &es->s, &se);
    int32_t desc[4 * KV_SPEC_MAX_GROUPS];
    uint8_t model_fp[PREFIX_KEY_BYTES];
    int n_desc = rc == 0 ? eng_kv_layout(e, desc, model_fp, &se) : 0;
    if (rc == 0 && (n_desc < 0 || eng_swa_store_open(e, desc, n_desc, model_fp, key, &se))) {
        if (key) OPENSSL_cleanse(key, sizeof *key);
        free(key);
        return cf_fail(err, "%s", se.msg);
    }
    if (key) {
        OPENSSL_cleanse(key, sizeof *key); /* the store keeps its own copy */
        free(key);
    }
    if (rc) {
        LOG_WARN("engine: persistent KV store disabled, serving without it: %s", se.msg);
        e->st.store.degraded = 1;
    }
    return 0;
}

/* Drops the references of a chain's destination blocks [from, n_load). */
static void es_unref_ids(cinfer_engine *e, store_chain *ch, int32_t from) {
    for (int32_t i = from; i < ch->n_load; i++) {
        e->es->held[ch->ids[i]]--;
        kv_pool_unref(e->kv, ch->ids[i]);
    }
}

static void es_write_done(cinfer_engine *e, const store_event *ev) {
    int32_t id = (int32_t)ev->tag;
    if (!ev->ok) e->es->has_known[id] = 0;
    e->es->held[id]--;
    kv_pool_unref(e->kv, id);
}

void eng_store_close(cinfer_engine *e) {
    eng_store *es = e->es;
    if (!es) return;
    eng_swa_store_close(e); /* first: frees the block chains parked behind snapshot lookups */
    if (es->s) {
        if (!store_stop(es->s)) {
            e->store_abandoned = true;
            LOG_ERROR("engine: the persistent KV store did not stop in time; shutting down without it");
        }
        int n;
        while ((n = store_poll(es->s, es->ev, ES_EVENTS)) > 0)
            for (int i = 0; i < n; i++) {
                store_chain *ch = es->ev[i].chain;
                if (!ch) {
                    es_write_done(e, &es->ev[i]);
                    continue;
                }
                if (ch->owner) ((eng_req *)ch->owner)->st_chain = NULL;
                if (ch->phase == STORE_CHAIN_LOAD) es_unref_ids(e, ch, 0);
                store_chain_free(ch);
            }
        store_close(es->s);
    }
    for (int32_t i = 0; i < es->n_deferred; i++) {
        store_chain *ch = es->deferred[i];
        if (ch->owner) ((eng_req *)ch->owner)->st_chain = NULL;
        es_unref_ids(e, ch, 0);
        store_chain_free(ch);
    }
    free(es->deferred);
    free(es->deferred_step);
    free(es->known);
    free(es->has_known);
    free(es->held);
    free(es);
    e->es = NULL;
}

bool eng_store_on_admit(cinfer_engine *e, eng_req *r) {
    eng_store *es = e->es;
    if (!es || !es->s) return false;
    r->st_admits++;
    if (r->st_lookups >= ES_MAX_LOOKUPS || r->n_registered != r->n_blocks) return false;
    int32_t bt = es->bt, full = (r->prompt_len + r->n_generated - 1) / bt;
    if (full > r->max_blocks) full = r->max_blocks;
    int32_t n = full - r->n_blocks;
    if (n <= 0) return false;
    store_chain *ch = store_chain_new(es->s, n);
    if (!ch) return false;
    memcpy(ch->parent0, r->last_key, PREFIX_KEY_BYTES); /* zeros when no block matched */
    for (int32_t i = 0; i < n; i++) {
        const int32_t *tok = r->seq + (int64_t)(r->n_blocks + i) * bt;
        const uint8_t *parent = i > 0 ? ch->keys[i - 1] : (r->n_blocks > 0 ? r->last_key : NULL);
        if (prefix_cache_key(e->pc, parent, tok, es_salt(r), ch->keys[i])) {
            store_chain_free(ch);
            return false;
        }
        memcpy(ch->tokens + (int64_t)i * bt, tok, (size_t)bt * sizeof(int32_t));
    }
    ch->owner = r;
    r->st_chain = ch;
    r->st_usage = r->st_admits == 1;
    r->st_lookups++;
    r->st_deadline = time_now() + es->load_timeout_s;
    r->state = SCHED_LOADING;
    es->n_loading++;
    store_submit_lookup(es->s, ch);
    return true;
}

void eng_store_detach(cinfer_engine *e, eng_req *r) {
    if (!r->st_chain) return;
    if (r->sw_chain) { /* parked behind a snapshot lookup: the store does not hold it, nothing allocated */
        eng_swa_store_detach(e, r);
        store_chain_free(r->st_chain);
    } else {
        r->st_chain->owner = NULL; /* the completion only frees what the chain holds */
    }
    r->st_chain = NULL;
    e->es->n_loading--;
}

/* The request stops waiting: RUNNING with whatever it holds now. */
static void es_resume(cinfer_engine *e, eng_req *r) {
    eng_store_detach(e, r);
    r->state = SCHED_RUNNING;
}

/* A LOAD finished for r: adopt the verified blocks in order. */
static void es_adopt(cinfer_engine *e, eng_req *r, store_chain *ch) {
    eng_store *es = e->es;
    int32_t bt = es->bt, i = 0;
    for (; i < ch->n_loaded; i++) {
        int32_t id = ch->ids[i], b = r->n_blocks;
        cf_err err;
        es->held[id]--; /* from here the reference is the request's (or dropped just below) */
        int32_t got = prefix_cache_insert(e->pc, b > 0 ? r->last_key : NULL, ch->tokens + (int64_t)i * bt, es_salt(r),
                                          id, r->last_key, &err);
        if (got < 0) {
            es->held[id]++; /* still ours: es_unref_ids drops it */
            LOG_WARN("engine: store block not adopted: %s", err.msg);
            break;
        }
        if (got != id) { /* another request registered the same key meanwhile */
            kv_pool_unref(e->kv, id);
            id = got;
        }
        r->blocks[b] = id;
        r->bptr[b] = kv_pool_block(e->kv, id);
        r->n_blocks = r->n_registered = b + 1;
        memcpy(es->known[id], ch->keys[i], PREFIX_KEY_BYTES);
        es->has_known[id] = 1;
    }
    es_unref_ids(e, ch, i);
    r->n_computed = r->n_blocks * bt;
    if (e->window_rings && i > 0) eng_swa_after_load(e, r, r->st_usage); /* the ring lacks these rows */
    if (r->st_usage && r->n_computed > r->usage.cached_tokens) {
        int32_t now = r->n_computed < r->prompt_len ? r->n_computed : r->prompt_len;
        int32_t add = now - r->usage.cached_tokens;
        if (add > 0) {
            r->usage.cached_tokens = now;
            e->st.cached_tokens += (uint64_t)add;
            e->st.cached_tokens_store += (uint64_t)add;
        }
    }
}

/* Makes room for one more deferred load; false when out of memory. */
static bool es_room_to_defer(eng_store *es) {
    if (es->n_deferred < es->cap_deferred) return true;
    int32_t cap = es->cap_deferred ? 2 * es->cap_deferred : 16;
    store_chain **d = realloc(es->deferred, (size_t)cap * sizeof *d);
    if (d) es->deferred = d;
    const void **t = realloc(es->deferred_step, (size_t)cap * sizeof *t);
    if (t) es->deferred_step = t;
    if (!d || !t) return false;
    es->cap_deferred = cap;
    return true;
}

/* Submits deferred loads whose step is over; drops those whose request left. */
static void es_run_deferred(cinfer_engine *e) {
    eng_store *es = e->es;
    int32_t w = 0;
    for (int32_t i = 0; i < es->n_deferred; i++) {
        store_chain *ch = es->deferred[i];
        if (!ch->owner) {
            es_unref_ids(e, ch, 0);
            store_chain_free(ch);
        } else if (e->inflight != es->deferred_step[i]) { /* that step completed (one poll per dispatch at most) */
            store_submit_load(es->s, ch, ch->n_load);
        } else {
            es->deferred[w] = ch;
            es->deferred_step[w++] = es->deferred_step[i];
        }
    }
    es->n_deferred = w;
}

/* Blocks the LOAD of a looked-up chain may take. */
static int32_t es_loadable(cinfer_engine *e, const store_chain *ch) {
    int32_t k = ch->n_found, avail = kv_pool_available(e->kv);
    return k < avail ? k : avail;
}

/* Allocates the destination blocks of a looked-up chain and submits (or
 * defers) its LOAD; false when nothing is to be loaded (the caller resumes r). */
static bool es_start_load(cinfer_engine *e, store_chain *ch) {
    eng_store *es = e->es;
    int32_t k = es_loadable(e, ch);
    cf_err err;
    if (k <= 0 || !es_room_to_defer(es) || kv_pool_alloc_n(e->kv, k, ch->ids, &err)) return false;
    for (int32_t i = 0; i < k; i++) {
        ch->dst[i] = kv_pool_block(e->kv, ch->ids[i]);
        es->held[ch->ids[i]]++;
    }
    ch->n_load = k; /* what the chain holds (store_submit_load sets it again) */
    if (!e->inflight) {
        store_submit_load(es->s, ch, k);
    } else {
        es->deferred[es->n_deferred] = ch;
        es->deferred_step[es->n_deferred++] = e->inflight;
    }
    return true;
}

void eng_store_continue(cinfer_engine *e, eng_req *r) {
    store_chain *ch = r->st_chain;
    if (!ch || es_start_load(e, ch)) return;
    es_resume(e, r);
    store_chain_free(ch);
}

static void es_chain_done(cinfer_engine *e, store_chain *ch) {
    eng_req *r = ch->owner;
    if (ch->phase == STORE_CHAIN_LOOKUP) {
        /* window models: the snapshot at the loaded blocks' end first (from the store), when missing here */
        if (r && eng_swa_store_lookup(e, r, ch, es_loadable(e, ch))) return;
        if (r && es_start_load(e, ch)) return;
        if (r) es_resume(e, r);
        store_chain_free(ch);
        return;
    }
    if (r) {
        es_adopt(e, r, ch);
        es_resume(e, r);
    } else {
        es_unref_ids(e, ch, 0);
    }
    store_chain_free(ch);
}

void eng_store_poll(cinfer_engine *e) {
    eng_store *es = e->es;
    if (!es || !es->s) return;
    eng_swa_store_poll(e);
    if (es->n_deferred > 0) es_run_deferred(e);
    int n;
    while ((n = store_poll(es->s, es->ev, ES_EVENTS)) > 0)
        for (int i = 0; i < n; i++) {
            if (es->ev[i].chain) es_chain_done(e, es->ev[i].chain);
            else es_write_done(e, &es->ev[i]);
        }
    if (es->n_loading > 0) {
        double now = time_now();
        for (int32_t i = 0; i < e->n_active; i++) {
            eng_req *r = e->active[i];
            if (r->st_chain && now > r->st_deadline) {
                es->timeouts++;
                LOG_WARN("engine: request %llu: store load exceeded %.0f ms; computing instead",
                         (unsigned long long)r->id, es->load_timeout_s * 1e3);
                es_resume(e, r);
            }
        }
    }
    store_stats ss;
    store_get_stats(es->s, &ss);
    es_public_stats(&ss, &e->st.store);
    e->st.store.load_timeouts = es->timeouts;
    eng_note_kv(e);
}

void eng_store_on_register(cinfer_engine *e, eng_req *r, int32_t from, const uint8_t *parent) {
    eng_store *es = e->es;
    if (!es || !es->s || r->n_registered > r->n_blocks) return;
    uint8_t key[PREFIX_KEY_BYTES], prev[PREFIX_KEY_BYTES];
    for (int32_t b = from; b < r->n_registered; b++) {
        const int32_t *tok = r->seq + (int64_t)b * es->bt;
        if (prefix_cache_key(e->pc, parent, tok, es_salt(r), key)) return;
        int32_t id = r->blocks[b];
        if (!es->has_known[id] || memcmp(es->known[id], key, PREFIX_KEY_BYTES)) {
            if (store_write(es->s, key, parent, tok, r->traffic_class, kv_pool_block(e->kv, id), (uint64_t)id) == 0) {
                kv_pool_ref(e->kv, id); /* released when the write completes (es_write_done) */
                es->held[id]++;
                memcpy(es->known[id], key, PREFIX_KEY_BYTES);
                es->has_known[id] = 1;
            }
        }
        memcpy(prev, key, PREFIX_KEY_BYTES);
        parent = prev;
    }
}

int32_t eng_store_n_loading(const cinfer_engine *e) { return e->es ? e->es->n_loading : 0; }

int32_t eng_store_held(const cinfer_engine *e, int32_t block) { return e->es ? e->es->held[block] : 0; }

bool eng_store_wait(cinfer_engine *e) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 5 * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    return pthread_cond_timedwait(&e->work_cv, &e->mu, &dl) != 0;
}
