/* kv_pool.c - see kv_pool.h. Free stack and LRU are intrusive lists over the
 * per-block next/prev arrays (a block is on at most one list at a time), so
 * every operation is O(1) and nothing is allocated after kv_pool_create. */
#include "engine/kv_pool.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_POOL_ALIGN 64
#define KV_NIL (-1)

struct kv_pool {
    int32_t n_blocks, block_tokens;
    int64_t block_floats, stride_bytes; /* stride: block bytes rounded up to KV_POOL_ALIGN */
    int64_t budget, bytes;
    float *mem;
    int32_t *refs, *next, *prev, *cached; /* per block */
    int32_t free_head, n_free;
    int32_t lru_head, lru_tail, n_lru; /* head = oldest */
    int32_t n_used;
    uint64_t evictions;
    kv_pool_evict_fn evict_fn;
    void *evict_ctx;
    /* window rings (kv_pool.h): n_rings rings of ring_floats, ring_stride bytes apart */
    int32_t n_rings, ring_tokens, ring_blocks, n_rings_used, ring_free_head;
    int64_t ring_floats, ring_stride;
    float *ring_mem;
    int32_t *ring_next; /* free list; KV_RING_USED while acquired */
};

#define KV_RING_USED (-2)

/* ---- specs ---- */

int kv_spec_from_model(const model *m, kv_spec *out, cf_err *err) {
    return kv_spec_from_model_as(m, KV_DTYPE_F32, out, err);
}

int kv_spec_from_model_as(const model *m, kv_dtype dt, kv_spec *out, cf_err *err) {
    memset(out, 0, sizeof *out);
    if (model_kv_dtype_check(m, dt, err)) return -1;
    model_kv_layout_as(m, dt, out);
    return kv_spec_check(out, err);
}

int kv_spec_check(const kv_spec *s, cf_err *err) {
    if (s->n_groups < 1 || s->n_groups > KV_SPEC_MAX_GROUPS)
        return cf_fail(err, "kv spec: %d layer groups (expected 1..%d)", s->n_groups, KV_SPEC_MAX_GROUPS);
    int64_t per_token = 0;
    for (int i = 0; i < s->n_groups; i++) {
        const kv_group_spec *g = &s->groups[i];
        if (g->kind < KV_LAYER_FULL || g->kind > KV_LAYER_WINDOW)
            return cf_fail(err, "kv spec: group %d has unknown kind %d", i, (int)g->kind);
        if (g->n_layers <= 0 || g->token_floats <= 0)
            return cf_fail(err, "kv spec: group %d has %d layers of %d floats per token (expected positive)", i,
                           g->n_layers, g->token_floats);
        if (g->row_tokens < 0 || g->row_tokens > (1 << 20))
            return cf_fail(err, "kv spec: group %d has %d tokens per row (expected 0..2^20)", i, g->row_tokens);
        if (g->kind == KV_LAYER_WINDOW && g->window <= 0)
            return cf_fail(err, "kv spec: window group %d has window %d (expected positive)", i, g->window);
        per_token += (int64_t)g->n_layers * g->token_floats;
        if (per_token > ((int64_t)1 << 40))
            return cf_fail(err, "kv spec: %lld floats per token is too large", (long long)per_token);
    }
    if (kv_spec_paged_token_floats(s) == 0)
        return cf_fail(err, "kv spec: no paged (full or MLA) layer group; window-only models are not supported");
    return 0;
}

int64_t kv_spec_block_floats(const kv_spec *s, int32_t block_tokens) {
    return kv_spec_paged_block_floats(s, block_tokens);
}

/* ---- lists ---- */

static void kv_pool_free_push(kv_pool *p, int32_t id) {
    p->next[id] = p->free_head;
    p->prev[id] = KV_NIL;
    p->free_head = id;
    p->n_free++;
}

static int32_t kv_pool_free_pop(kv_pool *p) {
    int32_t id = p->free_head;
    if (id == KV_NIL) return KV_NIL;
    p->free_head = p->next[id];
    p->next[id] = KV_NIL;
    p->n_free--;
    return id;
}

static void kv_pool_lru_push_tail(kv_pool *p, int32_t id) {
    p->prev[id] = p->lru_tail;
    p->next[id] = KV_NIL;
    if (p->lru_tail != KV_NIL) p->next[p->lru_tail] = id;
    else p->lru_head = id;
    p->lru_tail = id;
    p->n_lru++;
}

static void kv_pool_lru_remove(kv_pool *p, int32_t id) {
    if (p->prev[id] != KV_NIL) p->next[p->prev[id]] = p->next[id];
    else p->lru_head = p->next[id];
    if (p->next[id] != KV_NIL) p->prev[p->next[id]] = p->prev[id];
    else p->lru_tail = p->prev[id];
    p->next[id] = p->prev[id] = KV_NIL;
    p->n_lru--;
}

/* ---- lifetime ---- */

int kv_pool_create(const kv_spec *spec, int32_t block_tokens, int64_t budget_bytes, kv_pool **out, cf_err *err) {
    return kv_pool_create_rings(spec, block_tokens, budget_bytes, 0, 0, out, err);
}

static int64_t kv_align(int64_t bytes) { return (bytes + KV_POOL_ALIGN - 1) / KV_POOL_ALIGN * KV_POOL_ALIGN; }

/* The rings' share of the pool: n_rings rings (zeroed, so a stale lane the
 * attention kernel loads but never uses is a finite number). */
static int kv_pool_init_rings(kv_pool *p, const kv_spec *spec, int32_t n_rings, int32_t max_chunk, cf_err *err) {
    p->ring_free_head = KV_NIL;
    if (n_rings <= 0 || kv_spec_max_window(spec) == 0) return 0;
    p->ring_tokens = kv_ring_tokens(kv_spec_max_window(spec), max_chunk, p->block_tokens);
    p->ring_blocks = p->ring_tokens / p->block_tokens;
    p->ring_floats = kv_spec_ring_row_floats(spec) * p->ring_tokens;
    p->ring_stride = kv_align(p->ring_floats * (int64_t)sizeof(float));
    p->ring_mem = aligned_alloc(KV_POOL_ALIGN, (size_t)(n_rings * p->ring_stride));
    p->ring_next = malloc((size_t)n_rings * sizeof(int32_t));
    if (!p->ring_mem || !p->ring_next)
        return cf_fail(err, "kv pool: cannot allocate %d window rings of %lld bytes", n_rings,
                       (long long)p->ring_stride);
    memset(p->ring_mem, 0, (size_t)(n_rings * p->ring_stride));
    p->n_rings = n_rings;
    for (int32_t i = n_rings - 1; i >= 0; i--) {
        p->ring_next[i] = p->ring_free_head;
        p->ring_free_head = i;
    }
    return 0;
}

int kv_pool_create_rings(const kv_spec *spec, int32_t block_tokens, int64_t budget_bytes, int32_t n_rings,
                         int32_t max_chunk, kv_pool **out, cf_err *err) {
    *out = NULL;
    if (kv_spec_check(spec, err)) return -1;
    if (block_tokens <= 0) block_tokens = KV_POOL_DEFAULT_BLOCK_TOKENS;
    if (block_tokens % kv_spec_block_multiple(spec))
        return cf_fail(err, "kv pool: blocks of %d tokens, but the model stores one row per %d tokens (use a multiple)",
                       block_tokens, kv_spec_block_multiple(spec));
    int64_t floats = kv_spec_block_floats(spec, block_tokens);
    int64_t stride = kv_align(floats * (int64_t)sizeof(float));
    int64_t per_block = stride + 4 * (int64_t)sizeof(int32_t);
    int64_t fixed = (int64_t)sizeof(kv_pool) + 2 * KV_POOL_ALIGN; /* struct + worst-case alignment slack */
    int64_t ring_bytes = 0;
    if (n_rings > 0 && kv_spec_max_window(spec) > 0) {
        int32_t rt = kv_ring_tokens(kv_spec_max_window(spec), max_chunk, block_tokens);
        ring_bytes = n_rings *
                     (kv_align(kv_spec_ring_row_floats(spec) * rt * (int64_t)sizeof(float)) + (int64_t)sizeof(int32_t));
    }
    int64_t n = budget_bytes > fixed + ring_bytes ? (budget_bytes - fixed - ring_bytes) / per_block : 0;
    if (n > INT32_MAX - 1) n = INT32_MAX - 1;
    if (n < 1)
        return cf_fail(err,
                       "kv pool: budget of %lld bytes holds no block of %lld bytes after %d window rings (%lld bytes)",
                       (long long)budget_bytes, (long long)per_block, ring_bytes ? n_rings : 0, (long long)ring_bytes);
    kv_pool *p = calloc(1, sizeof *p);
    if (!p) return cf_fail(err, "kv pool: out of memory");
    p->n_blocks = (int32_t)n;
    p->block_tokens = block_tokens;
    p->block_floats = floats;
    p->stride_bytes = stride;
    p->budget = budget_bytes;
    p->bytes = fixed + ring_bytes + n * per_block;
    p->mem = aligned_alloc(KV_POOL_ALIGN, (size_t)(n * stride));
    p->refs = calloc((size_t)n, sizeof(int32_t));
    p->next = malloc((size_t)n * sizeof(int32_t));
    p->prev = malloc((size_t)n * sizeof(int32_t));
    p->cached = calloc((size_t)n, sizeof(int32_t));
    if (!p->mem || !p->refs || !p->next || !p->prev || !p->cached) {
        kv_pool_free(p);
        return cf_fail(err, "kv pool: cannot allocate %lld blocks of %lld bytes", (long long)n, (long long)stride);
    }
    p->free_head = p->lru_head = p->lru_tail = KV_NIL;
    for (int32_t i = p->n_blocks - 1; i >= 0; i--) kv_pool_free_push(p, i); /* ids come out 0, 1, 2, ... */
    if (kv_pool_init_rings(p, spec, n_rings, max_chunk, err)) {
        kv_pool_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void kv_pool_free(kv_pool *p) {
    if (!p) return;
    free(p->mem);
    free(p->refs);
    free(p->next);
    free(p->prev);
    free(p->cached);
    free(p->ring_mem);
    free(p->ring_next);
    free(p);
}

/* ---- queries ---- */

int32_t kv_pool_block_tokens(const kv_pool *p) { return p->block_tokens; }
int64_t kv_pool_block_floats(const kv_pool *p) { return p->block_floats; }
int32_t kv_pool_n_blocks(const kv_pool *p) { return p->n_blocks; }
int32_t kv_pool_available(const kv_pool *p) { return p->n_free + p->n_lru; }
int32_t kv_pool_lru_oldest(const kv_pool *p) { return p->lru_head; }

float *kv_pool_block(kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_blocks);
    return (float *)((char *)p->mem + (int64_t)id * p->stride_bytes);
}

kv_pool_stats kv_pool_get_stats(const kv_pool *p) {
    return (kv_pool_stats){
        .total = p->n_blocks,
        .free = p->n_free,
        .used = p->n_used,
        .cached = p->n_lru,
        .block_bytes = p->stride_bytes,
        .bytes = p->bytes,
        .budget = p->budget,
        .evictions = p->evictions,
        .rings = p->n_rings,
        .rings_used = p->n_rings_used,
        .ring_tokens = p->ring_tokens,
        .ring_bytes = p->ring_stride,
    };
}

/* ---- window rings ---- */

int32_t kv_pool_ring_acquire(kv_pool *p) {
    int32_t id = p->ring_free_head;
    if (id == KV_NIL) return KV_NIL;
    p->ring_free_head = p->ring_next[id];
    p->ring_next[id] = KV_RING_USED;
    p->n_rings_used++;
    return id;
}

void kv_pool_ring_release(kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_rings && p->ring_next[id] == KV_RING_USED && "kv_pool_ring_release of a free ring");
    p->ring_next[id] = p->ring_free_head;
    p->ring_free_head = id;
    p->n_rings_used--;
}

float *kv_pool_ring(kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_rings);
    return (float *)((char *)p->ring_mem + (int64_t)id * p->ring_stride);
}

int32_t kv_pool_ring_blocks(const kv_pool *p) { return p->ring_blocks; }

int32_t kv_pool_refs(const kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_blocks);
    return p->refs[id];
}

bool kv_pool_is_cached(const kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_blocks);
    return p->cached[id] != 0;
}

/* ---- allocation and references ---- */

static int32_t kv_pool_evict_oldest(kv_pool *p) {
    int32_t id = p->lru_head;
    if (id == KV_NIL) return KV_NIL;
    kv_pool_lru_remove(p, id);
    p->cached[id] = 0;
    p->evictions++;
    if (p->evict_fn) p->evict_fn(p->evict_ctx, id);
    return id;
}

int kv_pool_alloc(kv_pool *p, int32_t *id, cf_err *err) {
    int32_t b = kv_pool_free_pop(p);
    if (b == KV_NIL) b = kv_pool_evict_oldest(p);
    if (b == KV_NIL) return cf_fail(err, "kv pool: all %d blocks are in use", p->n_blocks);
    p->refs[b] = 1;
    p->n_used++;
    *id = b;
    return 0;
}

int kv_pool_alloc_n(kv_pool *p, int32_t n, int32_t *ids, cf_err *err) {
    if (n < 0) return cf_fail(err, "kv pool: cannot allocate %d blocks", n);
    if (n > kv_pool_available(p))
        return cf_fail(err, "kv pool: %d blocks requested, %d available of %d", n, kv_pool_available(p), p->n_blocks);
    for (int32_t i = 0; i < n; i++) {
        int rc = kv_pool_alloc(p, &ids[i], err);
        assert(rc == 0);
        (void)rc;
    }
    return 0;
}

void kv_pool_ref(kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_blocks);
    if (p->refs[id] == 0) {
        assert(p->cached[id] && "kv_pool_ref on a free block");
        kv_pool_lru_remove(p, id);
        p->n_used++;
    }
    p->refs[id]++;
}

int32_t kv_pool_unref(kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_blocks);
    assert(p->refs[id] > 0 && "kv_pool_unref on an unreferenced block");
    if (--p->refs[id] > 0) return p->refs[id];
    p->n_used--;
    if (p->cached[id]) kv_pool_lru_push_tail(p, id);
    else kv_pool_free_push(p, id);
    return 0;
}

void kv_pool_mark_cached(kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_blocks);
    assert(p->refs[id] > 0 && "only a referenced block can be marked cached");
    p->cached[id] = 1;
}

void kv_pool_unmark_cached(kv_pool *p, int32_t id) {
    assert(id >= 0 && id < p->n_blocks);
    if (!p->cached[id]) return;
    p->cached[id] = 0;
    if (p->refs[id] == 0) {
        kv_pool_lru_remove(p, id);
        kv_pool_free_push(p, id);
    }
}

void kv_pool_set_evict_hook(kv_pool *p, kv_pool_evict_fn fn, void *ctx) {
    p->evict_fn = fn;
    p->evict_ctx = ctx;
}

/* ---- invariant check (engine_check.c) ---- */

int kv_pool_check(const kv_pool *p, char *why, size_t cap) {
    int32_t n = p->n_blocks, n_free = 0, n_lru = 0, n_used = 0;
    for (int32_t id = 0; id < n; id++) {
        if (p->refs[id] < 0) return snprintf(why, cap, "kv_pool: block %d has %d references", id, p->refs[id]), -1;
        n_used += p->refs[id] > 0;
    }
    for (int32_t id = p->free_head; id != KV_NIL; id = p->next[id]) {
        if (id < 0 || id >= n || ++n_free > n) return snprintf(why, cap, "kv_pool: free stack is corrupt"), -1;
        if (p->refs[id] != 0 || p->cached[id])
            return snprintf(why, cap, "kv_pool: block %d on the free stack has %d refs, cached %d", id, p->refs[id],
                            p->cached[id]),
                   -1;
    }
    int32_t prev = KV_NIL;
    for (int32_t id = p->lru_head; id != KV_NIL; prev = id, id = p->next[id]) {
        if (id < 0 || id >= n || ++n_lru > n) return snprintf(why, cap, "kv_pool: LRU list is corrupt"), -1;
        if (p->refs[id] != 0 || !p->cached[id] || p->prev[id] != prev)
            return snprintf(why, cap, "kv_pool: block %d on the LRU has %d refs, cached %d", id, p->refs[id],
                            p->cached[id]),
                   -1;
    }
    if (prev != p->lru_tail) return snprintf(why, cap, "kv_pool: LRU tail is not the last block"), -1;
    int32_t rings_free = 0;
    for (int32_t id = p->ring_free_head; id != KV_NIL; id = p->ring_next[id])
        if (id < 0 || id >= p->n_rings || ++rings_free > p->n_rings)
            return snprintf(why, cap, "kv_pool: ring free list is corrupt"), -1;
    if (rings_free + p->n_rings_used != p->n_rings)
        return snprintf(why, cap, "kv_pool: rings: %d free + %d used != %d", rings_free, p->n_rings_used, p->n_rings),
               -1;
    if (n_free != p->n_free || n_lru != p->n_lru || n_used != p->n_used || n_free + n_lru + n_used != n)
        return snprintf(why, cap,
                        "kv_pool: accounting: %d free (counted %d) + %d cached (%d) + %d used (%d) != %d total",
                        p->n_free, n_free, p->n_lru, n_lru, p->n_used, n_used, n),
               -1;
    return 0;
}
