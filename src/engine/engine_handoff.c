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
 * the pass is committed. Window models are not handed off (their window state is not yet
 * part of the record stream): imports are dropped and exports stay empty.
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
    int32_t cap;
    size_t rec; /* bytes per record */
    uint8_t *buf; /* cap records */
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
    /* 2 MiB aligned, transparent huge pages asked for when it is that large (kern_alloc_stream): a decode
     * worker on this host pulls these pages by CMA, which pins and walks the sender's pages one by one, so
     * 2 MiB pages move a handoff several times faster than 4 KiB ones (bench/README.md, issue 19). */
    if (n_blocks > 0 && !(x->buf = kern_alloc_stream((size_t)n_blocks * x->rec, NULL))) {
        free(x);
        return NULL;
    }
    atomic_init(&x->refs, 1);
    atomic_init(&x->ready, 0);
    return x;
}

void cinfer_kv_export_unref(cinfer_kv_export *x) {
    if (!x || atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) != 1) return;
    free(x->buf);
    free(x);
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
    if (!x || e->window_rings) return;
    int32_t bt = e->opt.block_tokens, end = r->n_registered < r->n_blocks ? r->n_registered : r->n_blocks;
    int32_t lim = cinfer_engine_kv_handoff_blocks(e, r->prompt_len);
    if (end > lim) end = lim;
    if (end > x->cap) end = x->cap;
    if (r->n_exported >= end) return;
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
}

void eng_handoff_import(cinfer_engine *e, eng_req *r) {
    int32_t bt = e->opt.block_tokens, n = r->n_kv_import;
    int32_t lim = cinfer_engine_kv_handoff_blocks(e, r->prompt_len);
    if (n > lim) n = lim;
    if (e->window_rings) n = 0;
    uint32_t hl = store_header_len((uint32_t)bt);
    uint8_t parent[PREFIX_KEY_BYTES], key[PREFIX_KEY_BYTES], got_key[PREFIX_KEY_BYTES];
    int32_t installed = 0;
    for (int32_t i = 0; i < n; i++) {
        const uint8_t *rec = r->kv_import + (size_t)i * e->kv_record_bytes;
        const int32_t *tok = r->seq + (int64_t)i * bt;
        if (prefix_cache_key(e->pc, i > 0 ? parent : NULL, tok, eh_salt(r), key)) break;
        store_expect x = {.fingerprint = e->kv_fp,
                          .key = key,
                          .parent = i > 0 ? parent : NULL,
                          .tokens = tok,
                          .n_tokens = (uint32_t)bt,
                          .payload_len = e->kv_payload_bytes};
        const char *why = NULL;
        /* now = 0: a live handoff does not expire (the hosts' clocks may differ) */
        if (store_verify(rec, hl, rec + hl, e->kv_record_bytes, &x, 0, &why) != STORE_VALID) {
            e->st.handoff_rejected_blocks++;
            LOG_WARN("engine: request %llu: handed-off block %d rejected (%s); computing from there",
                     (unsigned long long)r->id, i, why ? why : "invalid");
            break;
        }
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
    e->st.handoff_imported_blocks += (uint64_t)installed;
    eng_handoff_release(r);
}

void eng_handoff_release(eng_req *r) {
    if (r->kv_import && r->kv_import_release) r->kv_import_release(r->kv_import_owner, r->kv_import);
    else free(r->kv_import);
    r->kv_import = NULL;
    r->n_kv_import = 0;
}
