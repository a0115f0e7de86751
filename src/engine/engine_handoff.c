/* engine_handoff.c - the engine's half of the prefill/decode KV handoff
 * (docs/pd.md): exports of a prefill worker's prompt blocks and imports of
 * them on a decode worker.
 *
 * A record is one full prompt block as a persistent-store object
 * (store/store_format.h: header with the store fingerprint, the block's
 * prefix-cache key, its parent key and tokens; then the pool block's bytes),
 * without a MAC trailer. One format serves the store and the wire.
 *
 * Export: after each committed step, the blocks a request registered since
 * the last export (cached ones found at admission or loaded from the store
 * included) are encoded into its cinfer_kv_export, in order, and `ready` is
 * published with release order. Only prompt blocks before the last prompt
 * token are exported (cinfer_engine_kv_handoff_blocks): the receiver always
 * computes the last prompt token itself, as a prefix hit does.
 *
 * Import: records are verified exactly as a store load verifies an object
 * (store_verify: fingerprint, key recomputed here from this request's own
 * tokens, salt and parent, tokens, lengths, checksum), copied into freshly
 * allocated pool blocks and inserted into the prefix cache (the records'
 * buffer then goes back to its owner at once: eng_handoff_release, e.g. the
 * decode worker's receive-buffer pool); the blocks are
 * then left cached with no reference, so the request's admission finds them
 * by the ordinary prefix match (usage counts them as cached). The first record
 * that fails ends the import. Installing writes pool blocks, so it never runs
 * while a forward pass is in flight (a block freed during that pass may still
 * be written by it): engine.c holds such a request back (e->imp_head) until
 * the pass is committed.
 *
 * Window models (docs/pd.md "Window state"): the records alone cannot resume a
 * sequence, its window rings (and deepseek4's compressor inputs) must come
 * too. Once the last record is exported, the ring blocks before that boundary
 * are sealed into one snapshot (swa_format.h, the window-state tier's format)
 * in the export, published with release order (win). An import installs the
 * records only when its snapshot verifies (swa_snap_check at the boundary
 * after the last record) and every record verifies; the snapshot then goes
 * into the window-state tier under the last record's chain key, so admission
 * resumes exactly there (engine_swa.c), with no replay and no recompute.
 * Anything less installs nothing: the request computes, as without a handoff.
 *
 * Threads: everything here runs on the engine thread, except the
 * cinfer_kv_export_* accessors (any thread; atomics). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "engine/engine_internal.h"
#include "store/store_format.h"
#include "tensor/kernels.h"

struct cinfer_kv_export {
    atomic_int refs;
    atomic_int ready;
    atomic_int win; /* window snapshot: 0 pending, 1 in win_buf, -1 none will come */
    int32_t cap;
    size_t rec; /* bytes per record */
    uint8_t *buf; /* cap records */
    size_t win_bytes; /* 0: no window state */
    float *win_buf;
};

size_t cinfer_engine_kv_record_bytes(const cinfer_engine *e) { return e->kv_record_bytes; }

int32_t cinfer_engine_block_tokens(const cinfer_engine *e) { return e->opt.block_tokens; }

void cinfer_engine_kv_fingerprint(const cinfer_engine *e, uint8_t out[32]) { memcpy(out, e->kv_fp, PREFIX_KEY_BYTES); }

int32_t cinfer_engine_kv_handoff_blocks(const cinfer_engine *e, int32_t n_prompt) {
    return n_prompt > 1 ? (n_prompt - 1) / e->opt.block_tokens : 0;
}

cinfer_kv_export *cinfer_kv_export_new(const cinfer_engine *e, int32_t n_blocks) {
    if (n_blocks < 0) return NULL;
    cinfer_kv_export *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->cap = n_blocks;
    x->rec = e->kv_record_bytes;
    x->win_bytes = n_blocks > 0 ? cinfer_engine_kv_window_bytes(e) : 0;
    /* 2 MiB aligned, transparent huge pages asked for when it is that large (kern_alloc_stream): a decode
     * worker on this host pulls these pages by CMA, which pins and walks the sender's pages one by one, so
     * 2 MiB pages move a handoff several times faster than 4 KiB ones (bench/README.md, issue 19). */
    if ((n_blocks > 0 && !(x->buf = kern_alloc_stream((size_t)n_blocks * x->rec, NULL))) ||
        (x->win_bytes && !(x->win_buf = aligned_alloc(64, (x->win_bytes + 63) / 64 * 64)))) {
        free(x->buf);
        free(x);
        return NULL;
    }
    atomic_init(&x->refs, 1);
    atomic_init(&x->ready, 0);
    atomic_init(&x->win, x->win_bytes ? 0 : -1);
    return x;
}

void cinfer_kv_export_unref(cinfer_kv_export *x) {
    if (!x || atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) != 1) return;
    free(x->buf);
    free(x->win_buf);
    free(x);
}

int cinfer_kv_export_window(const cinfer_kv_export *x, const uint8_t **data) {
    int w = atomic_load_explicit(&((cinfer_kv_export *)x)->win, memory_order_acquire);
    if (w == 1) *data = (const uint8_t *)x->win_buf;
    return w;
}

size_t cinfer_engine_kv_window_bytes(const cinfer_engine *e) {
    swa_snap_geom g = eng_swa_geom(e);
    return e->window_rings && g.n_blocks ? (size_t)swa_snap_floats(&g) * sizeof(float) : 0;
}

/* The records are all exported: the window state at their end goes with them (or none will). */
static void eh_export_window(cinfer_engine *e, eng_req *r, cinfer_kv_export *x) {
    if (!x->win_bytes || atomic_load_explicit(&x->win, memory_order_relaxed) != 0 || r->n_exported < x->cap) return;
    bool ok = eng_swa_capture(e, r, r->n_exported, x->win_buf);
    if (ok) e->st.handoff_window_exported_bytes += x->win_bytes;
    else LOG_WARN("engine: request %llu: window state not exported (its rows are gone)", (unsigned long long)r->id);
    atomic_store_explicit(&x->win, ok ? 1 : -1, memory_order_release);
}

int32_t cinfer_kv_export_ready(const cinfer_kv_export *x) {
    return atomic_load_explicit(&((cinfer_kv_export *)x)->ready, memory_order_acquire);
}

const uint8_t *cinfer_kv_export_record(const cinfer_kv_export *x, int32_t i) {
    return i >= 0 && i < x->cap ? x->buf + (size_t)i * x->rec : NULL;
}

void cinfer_kv_export_ref(cinfer_kv_export *x) { atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed); }

void eng_handoff_init(cinfer_engine *e) {
    e->kv_payload_bytes = (size_t)kv_pool_block_floats(e->kv) * sizeof(float);
    e->kv_record_bytes = store_header_len((uint32_t)e->opt.block_tokens) + e->kv_payload_bytes;
}

static prefix_salt eh_salt(const eng_req *r) { return (prefix_salt){.bytes = r->salt, .len = r->salt_len}; }

void eng_handoff_export(cinfer_engine *e, eng_req *r) {
    cinfer_kv_export *x = r->kv_export;
    if (!x) return;
    int32_t bt = e->opt.block_tokens, end = r->n_registered < r->n_blocks ? r->n_registered : r->n_blocks;
    int32_t lim = cinfer_engine_kv_handoff_blocks(e, r->prompt_len);
    if (end > lim) end = lim;
    if (end > x->cap) end = x->cap;
    if (r->n_exported >= end) return eh_export_window(e, r, x);
    int64_t now = (int64_t)time(NULL);
    for (int32_t b = r->n_exported; b < end; b++) {
        const int32_t *tok = r->seq + (int64_t)b * bt;
        store_obj_hdr h = {.n_tokens = (uint32_t)bt,
                           .traffic_class = r->traffic_class,
                           .created = now,
                           .expires = now + 3600,
                           .payload_len = e->kv_payload_bytes};
        memcpy(h.fingerprint, e->kv_fp, sizeof h.fingerprint);
        if (b > 0) memcpy(h.parent, r->exp_key, sizeof h.parent);
        if (prefix_cache_key(e->pc, b > 0 ? r->exp_key : NULL, tok, eh_salt(r), h.key)) return;
        uint8_t *rec = x->buf + (size_t)b * x->rec;
        const float *payload = kv_pool_block(e->kv, r->blocks[b]);
        uint32_t hl = store_encode(&h, tok, payload, rec, x->rec);
        if (!hl) return;
        memcpy(rec + hl, payload, e->kv_payload_bytes);
        memcpy(r->exp_key, h.key, sizeof r->exp_key);
        r->n_exported = b + 1;
        e->st.handoff_exported_blocks++;
    }
    atomic_store_explicit(&x->ready, r->n_exported, memory_order_release);
    eh_export_window(e, r, x);
}

/* Verifies record i of r's import (its key chained from parent, computed from r's own tokens and
 * salt): true with its key in key. */
static bool eh_verify(cinfer_engine *e, eng_req *r, int32_t i, const uint8_t *parent, uint8_t key[PREFIX_KEY_BYTES]) {
    int32_t bt = e->opt.block_tokens;
    uint32_t hl = store_header_len((uint32_t)bt);
    const uint8_t *rec = r->kv_import + (size_t)i * e->kv_record_bytes;
    const int32_t *tok = r->seq + (int64_t)i * bt;
    if (prefix_cache_key(e->pc, parent, tok, eh_salt(r), key)) return false;
    store_expect x = {.fingerprint = e->kv_fp,
                      .key = key,
                      .parent = parent,
                      .tokens = tok,
                      .n_tokens = (uint32_t)bt,
                      .payload_len = e->kv_payload_bytes};
    const char *why = NULL;
    /* now = 0: a live handoff does not expire (the hosts' clocks may differ) */
    if (store_verify(rec, hl, rec + hl, e->kv_record_bytes, &x, 0, &why) == STORE_VALID) return true;
    e->st.handoff_rejected_blocks++;
    LOG_WARN("engine: request %llu: handed-off block %d rejected (%s); computing from there", (unsigned long long)r->id,
             i, why ? why : "invalid");
    return false;
}

/* Window models: every one of the n records and the snapshot after them must verify, and the snapshot
 * goes into the window-state tier under the last record's key; else nothing is installed (0). */
static int32_t eh_import_window(cinfer_engine *e, eng_req *r, int32_t n) {
    uint8_t parent[PREFIX_KEY_BYTES], key[PREFIX_KEY_BYTES];
    cf_err err = {0};
    if (n <= 0) return 0;
    if (!r->kv_import_window) {
        cf_fail(&err, "no window state came with the records");
    } else {
        int32_t i = 0;
        for (; i < n && eh_verify(e, r, i, i > 0 ? parent : NULL, key); i++) memcpy(parent, key, sizeof parent);
        if (i < n) cf_fail(&err, "block %d did not verify", i);
        else eng_swa_import(e, key, n, r->kv_import_window, r->kv_import_window_bytes, &err);
    }
    if (!err.msg[0]) {
        e->st.handoff_window_imported_bytes += r->kv_import_window_bytes;
        return n;
    }
    e->st.handoff_window_rejected++;
    LOG_WARN("engine: request %llu: handed-off window state refused (%s); computing the prompt",
             (unsigned long long)r->id, err.msg);
    return 0;
}

void eng_handoff_import(cinfer_engine *e, eng_req *r) {
    int32_t bt = e->opt.block_tokens, n = r->n_kv_import;
    int32_t lim = cinfer_engine_kv_handoff_blocks(e, r->prompt_len);
    if (n > lim) n = lim;
    if (e->window_rings) n = eh_import_window(e, r, n);
    uint8_t parent[PREFIX_KEY_BYTES], key[PREFIX_KEY_BYTES], got_key[PREFIX_KEY_BYTES];
    uint32_t hl = store_header_len((uint32_t)bt);
    int32_t installed = 0;
    for (int32_t i = 0; i < n; i++) {
        const uint8_t *rec = r->kv_import + (size_t)i * e->kv_record_bytes;
        const int32_t *tok = r->seq + (int64_t)i * bt;
        if (!eh_verify(e, r, i, i > 0 ? parent : NULL, key)) break;
        int32_t id;
        cf_err err;
        if (kv_pool_alloc_n(e->kv, 1, &id, &err)) break; /* the pool is full: compute the rest */
        memcpy(kv_pool_block(e->kv, id), rec + hl, e->kv_payload_bytes);
        int32_t got = prefix_cache_insert(e->pc, i > 0 ? parent : NULL, tok, eh_salt(r), id, got_key, &err);
        kv_pool_unref(e->kv, id); /* cached with no reference (or a duplicate: freed) */
        if (got < 0) break;
        if (got != id) kv_pool_unref(e->kv, got); /* already cached: insert took a reference for us */
        memcpy(parent, key, sizeof parent);
        installed++;
    }
    /* a window model that installed fewer blocks than its snapshot covers must not resume them by bounded
     * replay (approximate): exact, from a snapshot or the start */
    if (e->window_rings && installed < n) r->swa_exact = true;
    e->st.handoff_imported_blocks += (uint64_t)installed;
    eng_handoff_release(r);
}

void eng_handoff_release(eng_req *r) {
    if (r->kv_import && r->kv_import_release) r->kv_import_release(r->kv_import_owner, r->kv_import);
    else free(r->kv_import);
    r->kv_import = NULL;
    r->n_kv_import = 0;
    r->kv_import_window = NULL;
    r->kv_import_window_bytes = 0;
}
