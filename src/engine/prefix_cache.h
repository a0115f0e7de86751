/* prefix_cache.h - content-addressed reuse of full KV blocks across requests.
 *
 * A full block (block_tokens tokens) of a sequence is named by a key that
 * covers everything its KV contents depend on: the tokens before it (through
 * the parent key), its own tokens, the model, and the request's cache salt.
 *
 * Key encoding (exact bytes fed to SHA-256, all integers little-endian):
 *   key_i = SHA-256( parent[32]                 key_{i-1}; 32 zero bytes for block 0
 *                  ‖ u32 block_tokens
 *                  ‖ i32 token[0] ‖ ... ‖ i32 token[block_tokens-1]
 *                  ‖ fingerprint[32]            prefix_cache_model_fingerprint()
 *                  ‖ u32 salt_len ‖ salt bytes  (salt_len = 0: no salt) )
 * tests/oracles/prefix_key.py computes the same bytes with hashlib.
 *
 * Ownership: the cache owns the key table (open addressing, linear probing,
 * backward-shift deletion; capacity fixed at create to >= 2x the pool's block
 * count, so it never grows) and one key per pool block. The pool owns the
 * blocks, their ref counts and the LRU of unreferenced cached blocks; the
 * cache marks registered blocks "cached" and, through the pool's evict hook,
 * drops the key of any block the pool evicts. Eviction happens only when an
 * allocation finds no free block, oldest released first, and never touches a
 * referenced block.
 *
 * Invariants: a key maps to at most one block and a block has at most one
 * key; a block is in the table iff the pool says it is cached; different
 * salts or fingerprints never produce the same key (short of SHA-256
 * collisions). Nothing is allocated after create.
 *
 * Callers: the engine on admission (match) and after each step (insert for
 * blocks that became full); the scheduler only sees counts (peek). Single
 * threaded, like the pool. */
#ifndef CINFER_ENGINE_PREFIX_CACHE_H
#define CINFER_ENGINE_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "engine/kv_pool.h"
#include "model/model.h"

#define PREFIX_KEY_BYTES 32

typedef struct prefix_cache prefix_cache;

typedef struct prefix_salt {
    const void *bytes; /* may be NULL when len == 0 */
    size_t len;
} prefix_salt;

typedef struct prefix_match {
    int32_t n_blocks; /* blocks matched (written to blocks[], one ref each taken) */
    int32_t n_tokens; /* n_blocks * block_tokens */
    uint8_t last_key[PREFIX_KEY_BYTES]; /* key of the last matched block (parent of the next); zeros if none */
} prefix_match;

typedef struct prefix_cache_stats {
    int32_t entries; /* keys in the table (= cached blocks, referenced or not) */
    uint64_t lookups, hits; /* blocks looked up / found by match */
    uint64_t inserts, duplicates, evictions;
} prefix_cache_stats;

/* Creates the cache over `pool` for the model named by `fingerprint` and
 * installs itself as the pool's evict hook. The pool must outlive the cache. */
int prefix_cache_create(kv_pool *pool, const uint8_t fingerprint[PREFIX_KEY_BYTES], prefix_cache **out, cf_err *err);
/* Forgets every key (unreferenced cached blocks become free) and frees the cache. */
void prefix_cache_free(prefix_cache *c);

/* The key of one block, as encoded above. parent NULL = first block. */
int prefix_cache_block_key(const uint8_t *parent, const int32_t *tokens, int32_t block_tokens,
                           const uint8_t fingerprint[PREFIX_KEY_BYTES], prefix_salt salt, uint8_t out[PREFIX_KEY_BYTES],
                           cf_err *err);

/* Longest chain of cached full blocks covering a prefix of tokens[0..n):
 * writes their ids to blocks[] (at most cap), takes one reference on each
 * (a cached unreferenced block leaves the LRU) and fills *m. Only full blocks
 * inside [0, n) count: pass n - 1 when the last token must be computed. */
int prefix_cache_match(prefix_cache *c, const int32_t *tokens, int32_t n, prefix_salt salt, int32_t *blocks,
                       int32_t cap, prefix_match *m, cf_err *err);
/* Same walk without taking references or touching stats: cached tokens only. */
int32_t prefix_cache_peek(prefix_cache *c, const int32_t *tokens, int32_t n, prefix_salt salt);
/* The same two walks continuing a chain: tokens[0..bt) is the block whose
 * parent key is `parent` (NULL: the first block of the sequence). peek_from
 * writes the last found key to last_key (when not NULL; parent or zeros when
 * nothing was found). For chains that change salt midway (the approximate
 * lineage after a bounded replay, docs/engine.md). */
int prefix_cache_match_from(prefix_cache *c, const uint8_t *parent, const int32_t *tokens, int32_t n, prefix_salt salt,
                            int32_t *blocks, int32_t cap, prefix_match *m, cf_err *err);
int32_t prefix_cache_peek_from(prefix_cache *c, const uint8_t *parent, const int32_t *tokens, int32_t n,
                               prefix_salt salt, uint8_t last_key[PREFIX_KEY_BYTES]);

/* Registers `block` (referenced by the caller, holding the KV of
 * tokens[0..block_tokens)) whose parent key is `parent` (NULL = first block
 * of the sequence); writes the block's key to key_out. First writer wins:
 *   returns `block` when the key was new (block is now cached);
 *   returns the existing block when the key was already present, with a
 *   reference taken for the caller, who should put it in its block table and
 *   unref its own copy. Returns -1 (err set) if `block` is already cached
 *   under another key or is not referenced. */
int32_t prefix_cache_insert(prefix_cache *c, const uint8_t *parent, const int32_t *tokens, prefix_salt salt,
                            int32_t block, uint8_t key_out[PREFIX_KEY_BYTES], cf_err *err);

prefix_cache_stats prefix_cache_get_stats(const prefix_cache *c);

/* Recounts the table: every entry names a block whose key it is, a block has
 * a key iff the pool marks it cached, entries == blocks with a key. 0, or -1
 * with why. O(capacity + blocks). */
int prefix_cache_check(const prefix_cache *c, char *why, size_t cap);

/* The key of one block under this cache's fingerprint, with the cache's
 * digest context (no allocation; for the store adapter). */
int prefix_cache_key(prefix_cache *c, const uint8_t *parent, const int32_t *tokens, prefix_salt salt,
                     uint8_t out[PREFIX_KEY_BYTES]);

/* Model fingerprint: SHA-256 over, in order,
 *   "cinfer-model-fp-v1\0";
 *   the hyper-parameters (arch string; the fields every architecture
 *   shares; then the architecture's own, written by its fingerprint hook
 *   (model_fp_arch_hparams; llama writes zeros where v1 had deepseek2's
 *   fields); the tied-output byte), each as 4 little-endian bytes, bools as
 *   one byte;
 *   the tensor count, then per tensor in file order: name, ggml type, n_dims,
 *   ne[0..3], byte size, and a sample of its data - up to 64 bytes at the
 *   start, the middle and the end.
 * It is fast (independent of model size beyond the tensor count) and catches
 * a different architecture, shape, quantization, or re-trained/fine-tuned
 * weights in practice; it does not prove two files bit-identical (a change
 * confined to unsampled bytes goes unnoticed) and does not cover the
 * tokenizer beyond n_vocab. */
int prefix_cache_model_fingerprint(const model *m, uint8_t out[PREFIX_KEY_BYTES], cf_err *err);
/* The same over a GGUF file and hyper-parameters (model-free, for tools and tests). */
int prefix_cache_fingerprint_gguf(const gguf_file *f, const model_hparams *hp, uint8_t out[PREFIX_KEY_BYTES],
                                  cf_err *err);

#endif
