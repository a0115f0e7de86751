/* engine_swa_store.c - window-state snapshots in the persistent store
 * (engine_swa_store.h, docs/engine.md "Window state in the store"): a second
 * store (src/store/) in <kv_store_dir>/swa whose objects are whole snapshots
 * (swa_format.h) keyed by the boundary block's prefix chain key, written
 * with one short retention (`--retention swa=DURATION`) for every traffic
 * class.
 *
 * Write: eng_swa_snapshot seals a fresh tier slot and calls
 * eng_swa_store_write, which queues the slot itself as the payload and pins
 * it until the write completes (a pinned slot is never evicted or reused).
 *
 * Read: when a window model's block chain LOOKUP finds k blocks and the tier
 * has no snapshot at the boundary they reach, eng_swa_store_lookup parks the
 * block chain (r->st_chain stays attached, nothing allocated for it yet) and
 * looks the snapshot up: LOOKUP, then a LOAD into a staging buffer, then
 * swa_snap_check (untrusted bytes) and a copy into the tier. Either way the
 * parked block chain then goes on to its LOAD (eng_store_continue), and
 * eng_swa_after_load finds the snapshot in the tier: an exact resume instead
 * of a replay. Staging buffers are preallocated (SWS_STAGES); with none free
 * the snapshot is not looked up.
 *
 * Ownership: a snapshot chain belongs to its request (r->sw_chain, owner r)
 * or, once detached (cancel, timeout), to nobody: its completion then only
 * frees it and its stage. Engine thread only. */
#include "engine/engine_swa_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "engine/engine_internal.h"
#include "engine/engine_store.h"
#include "engine/swa_format.h"
#include "store/store.h"

#define SWS_STAGES 4
#define SWS_EVENTS 32

typedef struct eng_swa_store {
    store *s;
    swa_snap_geom geom;
    int64_t payload_floats;
    int32_t n_writing; /* writes in flight, each pinning its tier slot */
    float *stage[SWS_STAGES];
    bool stage_used[SWS_STAGES];
    store_event ev[SWS_EVENTS];
} eng_swa_store;

static void sws_notify(void *ctx) {
    cinfer_engine *e = ctx;
    pthread_mutex_lock(&e->mu);
    e->store_wake = true;
    pthread_cond_signal(&e->work_cv);
    pthread_mutex_unlock(&e->mu);
}

static void sws_free(eng_swa_store *w) {
    for (int i = 0; i < SWS_STAGES; i++) free(w->stage[i]);
    free(w);
}

int eng_swa_store_open(cinfer_engine *e, const int32_t *group_desc, int n_desc, const uint8_t model_fp[32],
                       const store_mac_key *key, cf_err *err) {
    const cinfer_engine_options *o = &e->opt;
    if (!e->swa || o->kv_store_swa_retention_s <= 0) return 0;
    eng_swa_store *w = calloc(1, sizeof *w);
    if (!w) return cf_fail(err, "engine: out of memory for the window-state store");
    w->geom = (swa_snap_geom){.n_blocks = (uint32_t)e->swa_slot_blocks,
                              .block_tokens = (uint32_t)o->block_tokens,
                              .block_floats = (uint64_t)e->swa_block_floats};
    w->payload_floats = swa_snap_floats(&w->geom);
    for (int i = 0; i < SWS_STAGES; i++)
        if (!(w->stage[i] = aligned_alloc(64, ((size_t)w->payload_floats * sizeof(float) + 63) / 64 * 64))) {
            sws_free(w);
            return cf_fail(err, "engine: out of memory for window-state staging");
        }
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/swa", o->kv_store_dir) >= (int)sizeof dir) {
        sws_free(w);
        return cf_fail(err, "engine: store directory name too long");
    }
    int32_t desc[4 * KV_SPEC_MAX_GROUPS + 1];
    memcpy(desc, group_desc, (size_t)n_desc * sizeof *desc);
    desc[n_desc] = e->swa_slot_blocks; /* the snapshot's geometry is part of its identity */
    store_config c = {
        .dir = dir,
        .block_tokens = (uint32_t)o->block_tokens,
        .payload_bytes = (uint64_t)w->payload_floats * sizeof(float),
        .quota_bytes = o->kv_store_quota_bytes,
        .sync = o->kv_store_sync,
        .gc_interval_s = o->kv_store_gc_interval_s,
        .close_timeout_ms = o->kv_store_close_timeout_ms,
        .mac_key = key,
        .io_threads = 1,
        .write_slots = 64,
        .notify = sws_notify,
        .notify_ctx = e,
    };
    for (int i = 0; i < STORE_N_CLASSES; i++) c.retention_s[i] = o->kv_store_swa_retention_s;
    cf_err se = {0};
    char kind[32];
    snprintf(kind, sizeof kind, "swa-%s", kv_dtype_name(e->kv_dt)); /* ring rows are stored as the cache's type */
    if (store_fingerprint(model_fp, c.block_tokens, desc, n_desc + 1, kind, c.fingerprint, &se)) {
        sws_free(w);
        return cf_fail(err, "%s", se.msg);
    }
    if (store_open(&c, &w->s, &se)) {
        LOG_WARN("engine: window-state snapshots not stored: %s", se.msg);
        sws_free(w);
        return 0;
    }
    e->sws = w;
    return 0;
}

void eng_swa_store_write(cinfer_engine *e, eng_req *r, int32_t slot, float *data, int32_t boundary_block) {
    eng_swa_store *w = e->sws;
    if (!w) return;
    int32_t bt = e->opt.block_tokens;
    swa_snap_seal(&w->geom, (uint32_t)boundary_block, data);
    const int32_t *tok = r->seq + (int64_t)(boundary_block - 1) * bt;
    if (store_write(w->s, r->last_key, NULL, tok, r->traffic_class, data, (uint64_t)slot) == 0) {
        swa_state_pin(e->swa, slot); /* the slot is the payload until the write completes */
        w->n_writing++;
        e->st.swa_store_writes++;
    }
}

static int sws_take_stage(eng_swa_store *w) {
    for (int i = 0; i < SWS_STAGES; i++)
        if (!w->stage_used[i]) {
            w->stage_used[i] = true;
            return i;
        }
    return -1;
}

bool eng_swa_store_lookup(cinfer_engine *e, eng_req *r, store_chain *blocks, int32_t k) {
    eng_swa_store *w = e->sws;
    if (!w || k <= 0 || r->sw_chain) return false;
    int32_t bt = e->opt.block_tokens;
    if (swa_state_has(e->swa, blocks->keys[k - 1], time_now())) return false; /* the tier has it */
    int stage = sws_take_stage(w);
    if (stage < 0) return false;
    store_chain *ch = store_chain_new(w->s, 1);
    if (!ch) {
        w->stage_used[stage] = false;
        return false;
    }
    memcpy(ch->keys[0], blocks->keys[k - 1], STORE_KEY_BYTES); /* parent0 stays zeros (written so) */
    memcpy(ch->tokens, blocks->tokens + (int64_t)(k - 1) * bt, (size_t)bt * sizeof(int32_t));
    ch->ids[0] = stage;
    ch->owner = r;
    r->sw_chain = ch;
    r->sw_boundary = r->n_blocks + k;
    store_submit_lookup(w->s, ch);
    return true;
}

/* A snapshot loaded into stage: check it (untrusted) and copy it into the tier. */
static void sws_adopt(cinfer_engine *e, eng_req *r, store_chain *ch) {
    eng_swa_store *w = e->sws;
    const float *buf = w->stage[ch->ids[0]];
    cf_err err = {0};
    if (swa_snap_check(&w->geom, (uint32_t)r->sw_boundary, buf, (size_t)w->payload_floats * sizeof(float), &err)) {
        e->st.swa_store_invalid++;
        LOG_WARN("engine: request %llu: stored %s; replaying instead", (unsigned long long)r->id, err.msg);
        return;
    }
    float *dst = swa_state_put(e->swa, ch->keys[0], time_now());
    if (!dst) return; /* stored meanwhile, or no slot free of pins */
    memcpy(dst, buf, (size_t)w->payload_floats * sizeof(float));
    e->st.swa_store_hits++;
}

static void sws_chain_done(cinfer_engine *e, store_chain *ch) {
    eng_swa_store *w = e->sws;
    eng_req *r = ch->owner;
    if (r && ch->phase == STORE_CHAIN_LOOKUP && ch->n_found == 1) {
        ch->dst[0] = w->stage[ch->ids[0]];
        store_submit_load(w->s, ch, 1);
        return;
    }
    if (r && ch->phase == STORE_CHAIN_LOAD && ch->n_loaded == 1) sws_adopt(e, r, ch);
    else if (r) e->st.swa_store_misses++;
    w->stage_used[ch->ids[0]] = false;
    store_chain_free(ch);
    if (!r) return;
    r->sw_chain = NULL;
    eng_store_continue(e, r); /* the parked block chain goes on to its LOAD */
}

void eng_swa_store_poll(cinfer_engine *e) {
    eng_swa_store *w = e->sws;
    if (!w) return;
    int n;
    while ((n = store_poll(w->s, w->ev, SWS_EVENTS)) > 0)
        for (int i = 0; i < n; i++) {
            if (w->ev[i].chain) sws_chain_done(e, w->ev[i].chain);
            else { /* a write completed */ swa_state_unpin(e->swa, (int32_t)w->ev[i].tag);
                w->n_writing--;
            }
        }
}

void eng_swa_store_detach(cinfer_engine *e, eng_req *r) {
    (void)e;
    if (!r->sw_chain) return;
    r->sw_chain->owner = NULL; /* its completion frees it and its stage */
    r->sw_chain = NULL;
}

int32_t eng_swa_store_writing(const cinfer_engine *e) { return e->sws ? e->sws->n_writing : 0; }

void eng_swa_store_close(cinfer_engine *e) {
    eng_swa_store *w = e->sws;
    if (!w) return;
    bool abandoned = !store_stop(w->s);
    int n;
    while ((n = store_poll(w->s, w->ev, SWS_EVENTS)) > 0)
        for (int i = 0; i < n; i++) {
            store_chain *ch = w->ev[i].chain;
            if (!ch) {
                swa_state_unpin(e->swa, (int32_t)w->ev[i].tag);
                w->n_writing--;
                continue;
            }
            eng_req *r = ch->owner;
            if (r) { /* its block chain is parked here, outside the KV store */
                r->sw_chain = NULL;
                store_chain_free(r->st_chain);
                r->st_chain = NULL;
            }
            store_chain_free(ch);
        }
    store_close(w->s);
    if (abandoned) { /* a stuck thread may still use a stage or a tier slot: keep both */
        LOG_ERROR("engine: the window-state store did not stop in time; shutting down without it");
        e->store_abandoned = true;
        e->sws = NULL;
        return;
    }
    sws_free(w);
    e->sws = NULL;
}
