/* kv_pool.h - the engine's KV memory: a fixed set of equal-size blocks carved
 * out of one allocation made at init, under a byte budget.
 *
 * A block holds all paged layers of `block_tokens` consecutive tokens of one
 * sequence as one contiguous float array (the layout model.h documents), so a
 * block is also the unit written to / read from a persistent store. Its size
 * comes from a kv_spec (model.h): a short list of layer groups, each with a
 * kind (full attention K/V and MLA latent: paged, in blocks; sliding window:
 * in per-sequence rings, below) and the floats one token needs in one layer. kv_spec_from_model takes the model's own
 * description (its architecture's kv_layout hook); the pool does not care
 * what the floats mean.
 *
 * Block states (every block is in exactly one):
 *   free    refs == 0, not cached            on the free stack
 *   used    refs  > 0 (cached or not)        owned by its referrers
 *   cached  refs == 0, cached                on the LRU (oldest at the head)
 * "cached" means the prefix cache has registered the block's contents under a
 * key. Allocation pops the free stack; when it is empty it evicts the LRU
 * head (the least recently released cached block), first telling the evict
 * hook (the prefix cache) so it drops the key. All operations are O(1).
 *
 * Window rings (models with KV_LAYER_WINDOW groups, kv_pool_create_rings):
 * a fixed set of per-sequence rings, each holding the last rows of every
 * window layer of one sequence; not blocks, never cached or stored; acquired
 * at admission, released with the sequence's blocks. rings == free + used.
 *
 * Invariants: total == free + used + cached; bytes() <= budget (block memory,
 * rings and per-block metadata, all allocated at init; nothing is allocated
 * afterwards). Misuse (unref of a free block, bad ids) is an internal bug and
 * asserts; running out of blocks is an input condition and returns -1.
 *
 * Callers: the engine (per-sequence block tables), the prefix cache (marks
 * blocks cached, owns the key table), tests and the simulator. Single
 * threaded: the engine thread owns the pool. */
#ifndef CINFER_ENGINE_KV_POOL_H
#define CINFER_ENGINE_KV_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "model/model.h"

#define KV_POOL_DEFAULT_BLOCK_TOKENS 16

/* The model's layout (model_kv_layout: its architecture's groups), checked. */
int kv_spec_from_model(const model *m, kv_spec *out, cf_err *err);
/* The same with K/V rows stored as dt (model_kv_layout_as; kv_spec_from_model: f32). */
int kv_spec_from_model_as(const model *m, kv_dtype dt, kv_spec *out, cf_err *err);
/* Checks a spec (groups 1..KV_SPEC_MAX_GROUPS, positive sizes, no overflow). */
int kv_spec_check(const kv_spec *s, cf_err *err);
/* Floats in one block of block_tokens tokens: sum over groups of
 * n_layers * token_floats * block_tokens. For a spec from a model this equals
 * model_kv_block_floats(). */
int64_t kv_spec_block_floats(const kv_spec *s, int32_t block_tokens);

typedef struct kv_pool kv_pool;

typedef struct kv_pool_stats {
    int32_t total; /* blocks in the pool */
    int32_t free; /* on the free stack */
    int32_t used; /* referenced */
    int32_t cached; /* unreferenced but cached (evictable, on the LRU) */
    int64_t block_bytes;
    int64_t bytes; /* memory held: blocks + metadata (<= budget) */
    int64_t budget;
    uint64_t evictions; /* cached blocks reclaimed by allocation so far */
    int32_t rings, rings_used; /* window rings (0 without window groups) */
    int32_t ring_tokens; /* rows per ring */
    int64_t ring_bytes; /* bytes per ring */
} kv_pool_stats;

/* Called when allocation evicts an unreferenced cached block, before the
 * block is reused. Set by the prefix cache. */
typedef void (*kv_pool_evict_fn)(void *ctx, int32_t block);

/* Creates a pool of as many blocks as fit in budget_bytes (block memory plus
 * metadata). block_tokens <= 0 selects KV_POOL_DEFAULT_BLOCK_TOKENS. Fails if
 * not even one block fits or memory cannot be allocated. */
int kv_pool_create(const kv_spec *spec, int32_t block_tokens, int64_t budget_bytes, kv_pool **out, cf_err *err);
/* The same, plus n_rings window rings when the spec has window groups: each
 * kv_ring_tokens(max window, max_chunk, block_tokens) rows of every window
 * layer (model.h "KV layout"), taken from the budget before the blocks (so
 * bytes() <= budget still holds). n_rings 0: no rings. */
int kv_pool_create_rings(const kv_spec *spec, int32_t block_tokens, int64_t budget_bytes, int32_t n_rings,
                         int32_t max_chunk, kv_pool **out, cf_err *err);
void kv_pool_free(kv_pool *p);

/* Window rings: one per running sequence of a model with window groups.
 * acquire: a free ring id, or -1 when all are in use; release: back to the
 * free list (asserts it was acquired). A ring's contents are not cleared. */
int32_t kv_pool_ring_acquire(kv_pool *p);
void kv_pool_ring_release(kv_pool *p, int32_t id);
/* The ring's floats (ring_blocks ring blocks, 64-byte aligned). */
float *kv_pool_ring(kv_pool *p, int32_t id);
/* Ring blocks per ring (ring_tokens / block_tokens); 0 without rings. */
int32_t kv_pool_ring_blocks(const kv_pool *p);

int32_t kv_pool_block_tokens(const kv_pool *p);
int64_t kv_pool_block_floats(const kv_pool *p);
int32_t kv_pool_n_blocks(const kv_pool *p);
/* The block's floats (kv_pool_block_floats of them, 64-byte aligned). */
float *kv_pool_block(kv_pool *p, int32_t id);
kv_pool_stats kv_pool_get_stats(const kv_pool *p);
/* Blocks an allocation can get right now: free + cached. */
int32_t kv_pool_available(const kv_pool *p);

/* Allocates one block with refs = 1 (evicting the oldest cached block if no
 * block is free). Returns -1 with a message when every block is in use. */
int kv_pool_alloc(kv_pool *p, int32_t *id, cf_err *err);
/* All or nothing: n blocks into ids[], or -1 and nothing allocated. */
int kv_pool_alloc_n(kv_pool *p, int32_t n, int32_t *ids, cf_err *err);
/* Takes another reference on a used or cached block (a cached block leaves the LRU). */
void kv_pool_ref(kv_pool *p, int32_t id);
/* Drops a reference; at zero the block goes to the LRU tail if cached, else
 * to the free stack. Returns the remaining count. */
int32_t kv_pool_unref(kv_pool *p, int32_t id);
int32_t kv_pool_refs(const kv_pool *p, int32_t id);

/* Cached flag, managed by the prefix cache. mark: the block must be used.
 * unmark: an unreferenced block moves from the LRU to the free stack. */
void kv_pool_mark_cached(kv_pool *p, int32_t id);
void kv_pool_unmark_cached(kv_pool *p, int32_t id);
bool kv_pool_is_cached(const kv_pool *p, int32_t id);
void kv_pool_set_evict_hook(kv_pool *p, kv_pool_evict_fn fn, void *ctx);
/* Oldest cached block on the LRU, or -1 (for tests and diagnostics). */
int32_t kv_pool_lru_oldest(const kv_pool *p);
/* Walks the free stack and the LRU and recounts: every block in exactly one
 * state, counts match, free + cached + used == total. 0, or -1 with why. O(n). */
int kv_pool_check(const kv_pool *p, char *why, size_t cap);

#endif
