/* engine_swa.c - the engine's side of the window-state tier (swa_state.h,
 * docs/engine.md "Window state: snapshots and exact resume"): which ring
 * blocks a snapshot holds, taking snapshots at commit, finding the resume
 * point of a prefix hit, and restoring a snapshot into a fresh ring.
 *
 * Keyed on the layer-group kind only: everything here follows from the pool's
 * rings (KV_LAYER_WINDOW groups), never from the architecture.
 *
 * A pass from position B reads window rows [B - W + 1, B), which lie in the
 * position blocks [B/bt - nb, B/bt) with nb = ceil((W - 1) / bt): a snapshot
 * at boundary B is those nb ring blocks (all window layers), oldest first;
 * blocks before position 0 are zeros. Snapshots are taken in eng_commit
 * (after the forward pass that wrote the rows, before the next is
 * dispatched) as each block is registered, keyed by its prefix chain key
 * (r->last_key), for every boundary of the chunk just computed whose rows
 * the chunk has not yet overwritten in the ring (always the last one). Restores are planned in
 * eng_admit (the entry is pinned) and copied in eng_assemble, after the
 * previous pass finished: a ring released while planning may still be read
 * by the pass in flight (docs/engine.md "Lifetime"). A slot is laid out as
 * swa_format.h says (header, then the blocks), so it can go to the store as
 * it is (engine_swa_store.c). */
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "engine/engine_internal.h"
#include "engine/engine_swa_store.h"
#include "engine/swa_format.h"

int eng_swa_init(cinfer_engine *e, const kv_spec *spec, cf_err *err) {
    e->swa_slot_blocks = 0;
    e->swa_replay_tokens = 0;
    if (!e->window_rings) return 0;
    if (e->opt.swa_replay_auto ? kv_spec_replay_by_default(spec) : e->opt.swa_replay_tokens >= 0)
        e->swa_replay_tokens =
            e->opt.swa_replay_tokens > 0 ? e->opt.swa_replay_tokens : kv_spec_default_replay_tokens(spec);
    if (e->opt.swa_state_memory_bytes < 0) return 0;
    int32_t bt = e->opt.block_tokens, w = kv_spec_max_window(spec), rb = kv_pool_ring_blocks(e->kv);
    int32_t nb = (w - 1 + bt - 1) / bt;
    if (nb < 1) nb = 1;
    if (nb > rb - 1) { /* the chunk just computed may have overwritten the oldest rows (max_batch_tokens < block) */
        LOG_WARN("engine: window-state tier off: %d ring blocks cannot keep a %d-block snapshot", rb, nb);
        return 0;
    }
    int64_t budget = e->opt.swa_state_memory_bytes ? e->opt.swa_state_memory_bytes : SWA_DEFAULT_MEMORY_BYTES;
    double ttl = e->opt.swa_state_ttl_s > 0 ? e->opt.swa_state_ttl_s : SWA_DEFAULT_TTL_S;
    e->swa_block_floats = (int64_t)bt * kv_spec_ring_row_floats(spec);
    /* a slot is a whole snapshot (swa_format.h): its header (sealed when it goes to the store), then the blocks */
    if (swa_state_create(budget, SWA_SNAP_HDR_FLOATS + nb * e->swa_block_floats, ttl, &e->swa, err)) return -1;
    e->swa_slot_blocks = nb;
    return 0;
}

/* The ring block holding position block pb of a ring of rb blocks. */
static float *eng_swa_ring_block(cinfer_engine *e, int32_t ring, int32_t pb) {
    return kv_pool_ring(e->kv, ring) + (int64_t)(pb % kv_pool_ring_blocks(e->kv)) * e->swa_block_floats;
}

prefix_salt eng_swa_approx_salt(const eng_req *r) {
    return (prefix_salt){.bytes = r->salt, .len = r->salt_len + sizeof ENG_SWA_APPROX_MARK};
}

int32_t eng_swa_approx_peek(cinfer_engine *e, eng_req *r, int32_t exact, int32_t limit) {
    uint8_t parent[PREFIX_KEY_BYTES];
    prefix_salt salt = {.bytes = r->salt, .len = r->salt_len};
    if (exact > 0 && prefix_cache_peek_from(e->pc, NULL, r->seq, exact, salt, parent) != exact) return 0;
    return prefix_cache_peek_from(e->pc, exact > 0 ? parent : NULL, r->seq + exact, limit - exact,
                                  eng_swa_approx_salt(r), NULL);
}

/* Do r's ring blocks still hold the rows before boundary block end (not overwritten by the chunk just computed)? */
static bool eng_swa_rows_kept(cinfer_engine *e, const eng_req *r, int32_t end) {
    int32_t bt = e->opt.block_tokens, nb = e->swa_slot_blocks;
    int32_t first = end - nb > 0 ? end - nb : 0, last = (r->n_computed - 1) / bt;
    return r->ring >= 0 && end > 0 && end * bt <= r->n_computed && first > last - kv_pool_ring_blocks(e->kv);
}

/* Copies the ring blocks of position blocks [end - nb, end) (zeros before position 0) after the header at slot. */
static void eng_swa_copy_out(cinfer_engine *e, const eng_req *r, int32_t end, float *slot) {
    int32_t nb = e->swa_slot_blocks;
    float *dst = slot + SWA_SNAP_HDR_FLOATS;
    size_t bytes = (size_t)e->swa_block_floats * sizeof(float);
    for (int32_t j = 0; j < nb; j++) {
        int32_t pb = end - nb + j;
        float *d = dst + (int64_t)j * e->swa_block_floats;
        if (pb < 0) memset(d, 0, bytes);
        else memcpy(d, eng_swa_ring_block(e, r->ring, pb), bytes);
    }
}

void eng_swa_snapshot(cinfer_engine *e, eng_req *r) {
    /* after a replay the keys are the approximate lineage's (eng_register), so only replay-mode requests that
     * continue that lineage ever find these snapshots */
    if (!e->swa || r->ring < 0 || r->n_registered <= 0) return;
    int32_t end = r->n_registered; /* position blocks [end - nb, end) */
    if (end == r->swa_snap_block || !eng_swa_rows_kept(e, r, end)) return; /* rows overwritten */
    r->swa_snap_block = end;
    float *slot = swa_state_put(e->swa, r->last_key, time_now());
    if (!slot) return; /* already stored (refreshed) or no slot free of pins */
    eng_swa_copy_out(e, r, end, slot);
    e->st.swa_snapshots++;
    if (!r->approx) eng_swa_store_write(e, r, swa_state_slot_of(e->swa, slot), slot, end); /* exact state only */
}

/* The last boundary in [from, limit) (block units, keys chained from `parent`
 * with `salt`) with a live snapshot: its end in tokens, 0 none; pins it when
 * slot_out. */
static int32_t eng_swa_last_snapshot(cinfer_engine *e, eng_req *r, const uint8_t *parent, int32_t from, int32_t limit,
                                     prefix_salt salt, uint8_t key_out[PREFIX_KEY_BYTES], int32_t *slot_out) {
    int32_t bt = e->opt.block_tokens, best = 0, n = limit / bt;
    uint8_t key[PREFIX_KEY_BYTES], chain[PREFIX_KEY_BYTES], best_key[PREFIX_KEY_BYTES];
    double now = time_now();
    for (int32_t b = from / bt; b < n; b++) {
        if (prefix_cache_key(e->pc, parent, r->seq + (int64_t)b * bt, salt, key)) break;
        if (swa_state_has(e->swa, key, now)) {
            best = b + 1;
            memcpy(best_key, key, sizeof best_key);
        }
        parent = memcpy(chain, key, sizeof chain);
    }
    if (!slot_out || best == 0) return best * bt;
    int32_t slot = swa_state_find(e->swa, best_key, now);
    if (slot < 0) return 0; /* cannot happen: has() just saw it live */
    swa_state_pin(e->swa, slot);
    *slot_out = slot;
    memcpy(key_out, best_key, PREFIX_KEY_BYTES);
    return best * bt;
}

int32_t eng_swa_approx_resume_point(cinfer_engine *e, eng_req *r, int32_t exact, int32_t limit,
                                    uint8_t key_out[PREFIX_KEY_BYTES], int32_t *slot_out) {
    if (slot_out) *slot_out = -1;
    if (!e->swa || limit <= exact) return 0;
    uint8_t parent[PREFIX_KEY_BYTES];
    prefix_salt salt = {.bytes = r->salt, .len = r->salt_len};
    if (exact > 0 && prefix_cache_peek_from(e->pc, NULL, r->seq, exact, salt, parent) != exact) return 0;
    return eng_swa_last_snapshot(e, r, exact > 0 ? parent : NULL, exact, limit, eng_swa_approx_salt(r), key_out,
                                 slot_out);
}

int32_t eng_swa_resume_point(cinfer_engine *e, eng_req *r, int32_t limit, uint8_t key_out[PREFIX_KEY_BYTES],
                             int32_t *slot_out) {
    if (slot_out) *slot_out = -1;
    if (!e->swa) return 0;
    prefix_salt salt = {.bytes = r->salt, .len = r->salt_len};
    return eng_swa_last_snapshot(e, r, NULL, 0, limit, salt, key_out, slot_out);
}

void eng_swa_restore(cinfer_engine *e, eng_req *r) {
    if (r->swa_slot < 0) return;
    int32_t bt = e->opt.block_tokens, nb = e->swa_slot_blocks, end = r->swa_restore_at / bt;
    const float *src = swa_state_data(e->swa, r->swa_slot) + SWA_SNAP_HDR_FLOATS;
    size_t bytes = (size_t)e->swa_block_floats * sizeof(float);
    for (int32_t j = 0; j < nb; j++)
        if (end - nb + j >= 0) /* rows before position 0 are never read */
            memcpy(eng_swa_ring_block(e, r->ring, end - nb + j), src + (int64_t)j * e->swa_block_floats, bytes);
    eng_swa_unpin(e, r);
}

/* A store load left r with cached blocks up to end = n_blocks * bt and a ring
 * without their rows: the same three ways as a memory hit (engine_step.c
 * eng_describe_window): a snapshot at end -> exact resume; else bounded replay
 * of the last swa_replay_tokens when allowed (first admission, not exact mode)
 * and it starts past the last snapshot; else exact: back to the last snapshot
 * (or the start), the loaded blocks beyond it dropped. */
void eng_swa_after_load(cinfer_engine *e, eng_req *r, bool first_admission) {
    int32_t bt = e->opt.block_tokens, end = r->n_blocks * bt, old_slot = r->swa_slot, slot = -1;
    uint8_t key[PREFIX_KEY_BYTES];
    int32_t snap = eng_swa_resume_point(e, r, end, key, &slot); /* pins slot when snap > 0 */
    if (old_slot >= 0) swa_state_unpin(e->swa, old_slot); /* planned for the boundary before the load */
    r->swa_slot = -1;
    int32_t w = e->swa_replay_tokens, from = (end - w) / bt * bt;
    if (snap < end && w > 0 && !r->swa_exact && first_admission && end - w > snap && from > snap) {
        if (slot >= 0) swa_state_unpin(e->swa, slot);
        r->replay_from = from;
        r->keep_below = end;
        r->approx = true; /* as a memory replay: later blocks go to the approximate lineage only */
        r->n_computed = from;
        int32_t upto = end < r->prompt_len ? end : r->prompt_len;
        if (first_admission && upto > from) r->usage.replayed_tokens = upto - from;
        e->st.swa_replays++;
        return;
    }
    for (int32_t i = r->n_blocks - 1; i >= snap / bt; i--) kv_pool_unref(e->kv, r->blocks[i]);
    r->n_blocks = r->n_registered = snap / bt;
    r->n_computed = snap;
    r->swa_slot = slot;
    r->swa_restore_at = snap;
    r->swa_snap_block = snap > 0 ? r->n_blocks : -1;
    if (snap > 0) memcpy(r->last_key, key, sizeof r->last_key);
    else memset(r->last_key, 0, sizeof r->last_key);
}

void eng_swa_unpin(cinfer_engine *e, eng_req *r) {
    if (r->swa_slot < 0) return;
    swa_state_unpin(e->swa, r->swa_slot);
    r->swa_slot = -1;
    r->swa_restore_at = 0;
}

void eng_swa_note(cinfer_engine *e) {
    if (!e->swa) return;
    (void)swa_state_expire(e->swa, time_now());
    swa_state_stats s = swa_state_get_stats(e->swa);
    e->st.swa_state_evictions = s.evictions;
    e->st.swa_state_expirations = s.expirations;
    e->st.swa_state_entries = s.used;
    e->st.swa_state_bytes = s.bytes;
    e->st.swa_state_budget = s.budget;
}

swa_snap_geom eng_swa_geom(const cinfer_engine *e) {
    if (!e->swa) return (swa_snap_geom){0};
    return (swa_snap_geom){.n_blocks = (uint32_t)e->swa_slot_blocks,
                           .block_tokens = (uint32_t)e->opt.block_tokens,
                           .block_floats = (uint64_t)e->swa_block_floats};
}

bool eng_swa_capture(cinfer_engine *e, const eng_req *r, int32_t end, float *buf) {
    if (!e->swa || !eng_swa_rows_kept(e, r, end)) return false;
    eng_swa_copy_out(e, r, end, buf);
    swa_snap_geom g = eng_swa_geom(e);
    swa_snap_seal(&g, (uint32_t)end, buf);
    return true;
}

int eng_swa_import(cinfer_engine *e, const uint8_t key[PREFIX_KEY_BYTES], int32_t end, const void *data, size_t len,
                   cf_err *err) {
    if (!e->swa) return cf_fail(err, "this engine keeps no window state (--swa-state-memory 0)");
    swa_snap_geom g = eng_swa_geom(e);
    if (swa_snap_check(&g, (uint32_t)end, data, len, err)) return -1;
    double now = time_now();
    float *slot = swa_state_put(e->swa, key, now);
    if (slot) memcpy(slot, data, len); /* the header too: a slot is a whole snapshot */
    else if (!swa_state_has(e->swa, key, now)) return cf_fail(err, "no window-state slot free of pins");
    return 0;
}
