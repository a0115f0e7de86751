/* prefix_cache.c - see prefix_cache.h. The table is open addressing over the
 * first 8 bytes of the (already uniformly distributed) SHA-256 key, linear
 * probing, backward-shift deletion (no tombstones), load factor <= 1/2. One
 * EVP digest context is allocated at create and reused for every key. */
#include "engine/prefix_cache.h"

#include <assert.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PC_EMPTY (-1)

typedef struct pc_entry {
    uint8_t key[PREFIX_KEY_BYTES];
    int32_t block; /* PC_EMPTY when the slot is free */
} pc_entry;

struct prefix_cache {
    kv_pool *pool;
    int32_t block_tokens, n_blocks;
    uint8_t fingerprint[PREFIX_KEY_BYTES];
    pc_entry *table;
    uint64_t mask; /* capacity - 1 (power of two) */
    uint8_t (*block_key)[PREFIX_KEY_BYTES]; /* per pool block: its key, valid when has_key */
    uint8_t *has_key;
    int32_t entries;
    EVP_MD_CTX *md;
    prefix_cache_stats stats;
};

/* ---- key encoding ---- */

static void pc_put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static int pc_hash_block(EVP_MD_CTX *md, const uint8_t *parent, const int32_t *tokens, int32_t block_tokens,
                         const uint8_t *fingerprint, prefix_salt salt, uint8_t out[PREFIX_KEY_BYTES]) {
    static const uint8_t zeros[PREFIX_KEY_BYTES];
    uint8_t buf[256];
    int ok = EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    ok = ok && EVP_DigestUpdate(md, parent ? parent : zeros, PREFIX_KEY_BYTES);
    pc_put_u32(buf, (uint32_t)block_tokens);
    ok = ok && EVP_DigestUpdate(md, buf, 4);
    for (int32_t i = 0; ok && i < block_tokens;) {
        int32_t n = 0;
        for (; i < block_tokens && n < (int32_t)sizeof buf / 4; i++, n++) pc_put_u32(buf + 4 * n, (uint32_t)tokens[i]);
        ok = EVP_DigestUpdate(md, buf, (size_t)n * 4);
    }
    ok = ok && EVP_DigestUpdate(md, fingerprint, PREFIX_KEY_BYTES);
    pc_put_u32(buf, (uint32_t)salt.len);
    ok = ok && EVP_DigestUpdate(md, buf, 4);
    if (ok && salt.len) ok = EVP_DigestUpdate(md, salt.bytes, salt.len);
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(md, out, &len) && len == PREFIX_KEY_BYTES;
    return ok ? 0 : -1;
}

int prefix_cache_block_key(const uint8_t *parent, const int32_t *tokens, int32_t block_tokens,
                           const uint8_t fingerprint[PREFIX_KEY_BYTES], prefix_salt salt, uint8_t out[PREFIX_KEY_BYTES],
                           cf_err *err) {
    if (block_tokens <= 0) return cf_fail(err, "prefix key: block of %d tokens", block_tokens);
    if (salt.len > UINT32_MAX) return cf_fail(err, "prefix key: salt of %zu bytes is too long", salt.len);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md) return cf_fail(err, "prefix key: out of memory");
    int rc = pc_hash_block(md, parent, tokens, block_tokens, fingerprint, salt, out);
    EVP_MD_CTX_free(md);
    return rc ? cf_fail(err, "prefix key: SHA-256 failed") : 0;
}

/* ---- table ---- */

static uint64_t pc_home(const prefix_cache *c, const uint8_t *key) {
    uint64_t h;
    memcpy(&h, key, sizeof h);
    return h & c->mask;
}

/* Slot holding key, or the empty slot where it would go; *found says which. */
static uint64_t pc_find(const prefix_cache *c, const uint8_t *key, bool *found) {
    uint64_t i = pc_home(c, key);
    while (c->table[i].block != PC_EMPTY) {
        if (memcmp(c->table[i].key, key, PREFIX_KEY_BYTES) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & c->mask;
    }
    *found = false;
    return i;
}

static void pc_table_delete(prefix_cache *c, uint64_t i) {
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & c->mask;
        if (c->table[j].block == PC_EMPTY) break;
        uint64_t k = pc_home(c, c->table[j].key);
        /* the entry at j may stay if its home lies cyclically in (i, j] */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        c->table[i] = c->table[j];
        i = j;
    }
    c->table[i].block = PC_EMPTY;
    c->entries--;
}

/* Removes a block's key (the block stays in the pool; its cached flag is the caller's business). */
static void pc_forget_block(prefix_cache *c, int32_t block) {
    if (!c->has_key[block]) return;
    bool found = false;
    uint64_t i = pc_find(c, c->block_key[block], &found);
    assert(found && c->table[i].block == block);
    if (found) pc_table_delete(c, i);
    c->has_key[block] = 0;
}

static void pc_on_evict(void *ctx, int32_t block) {
    prefix_cache *c = ctx;
    pc_forget_block(c, block);
    c->stats.evictions++;
}

/* ---- lifetime ---- */

int prefix_cache_create(kv_pool *pool, const uint8_t fingerprint[PREFIX_KEY_BYTES], prefix_cache **out, cf_err *err) {
    *out = NULL;
    prefix_cache *c = calloc(1, sizeof *c);
    if (!c) return cf_fail(err, "prefix cache: out of memory");
    c->pool = pool;
    c->block_tokens = kv_pool_block_tokens(pool);
    c->n_blocks = kv_pool_n_blocks(pool);
    memcpy(c->fingerprint, fingerprint, PREFIX_KEY_BYTES);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)c->n_blocks) cap <<= 1;
    c->mask = cap - 1;
    c->table = malloc(cap * sizeof *c->table);
    c->block_key = malloc((size_t)c->n_blocks * sizeof *c->block_key);
    c->has_key = calloc((size_t)c->n_blocks, 1);
    c->md = EVP_MD_CTX_new();
    if (!c->table || !c->block_key || !c->has_key || !c->md) {
        prefix_cache_free(c);
        return cf_fail(err, "prefix cache: cannot allocate a table for %d blocks", c->n_blocks);
    }
    for (uint64_t i = 0; i < cap; i++) c->table[i].block = PC_EMPTY;
    kv_pool_set_evict_hook(pool, pc_on_evict, c);
    *out = c;
    return 0;
}

void prefix_cache_free(prefix_cache *c) {
    if (!c) return;
    if (c->has_key) {
        kv_pool_set_evict_hook(c->pool, NULL, NULL);
        for (int32_t b = 0; b < c->n_blocks; b++)
            if (c->has_key[b]) kv_pool_unmark_cached(c->pool, b);
    }
    EVP_MD_CTX_free(c->md);
    free(c->table);
    free(c->block_key);
    free(c->has_key);
    free(c);
}

/* ---- match / insert ---- */

/* Walks the chain; with `blocks` != NULL takes refs and records ids. Returns blocks matched or -1. */
/* from: the parent key of tokens[0..bt) (NULL: tokens start the sequence); last_key gets the key of the
 * last block found (from, or zeros, when none). */
static int32_t pc_walk(prefix_cache *c, const uint8_t *from, const int32_t *tokens, int32_t n, prefix_salt salt,
                       int32_t *blocks, int32_t cap, uint8_t last_key[PREFIX_KEY_BYTES]) {
    uint8_t parent[PREFIX_KEY_BYTES] = {0}, key[PREFIX_KEY_BYTES];
    if (from) memcpy(parent, from, sizeof parent);
    int32_t full = n > 0 ? n / c->block_tokens : 0, got = 0;
    if (blocks && full > cap) full = cap;
    for (; got < full; got++) {
        if (pc_hash_block(c->md, got || from ? parent : NULL, tokens + (int64_t)got * c->block_tokens, c->block_tokens,
                          c->fingerprint, salt, key))
            return -1;
        bool found = false;
        uint64_t i = pc_find(c, key, &found);
        if (!found) break;
        if (blocks) {
            kv_pool_ref(c->pool, c->table[i].block);
            blocks[got] = c->table[i].block;
        }
        memcpy(parent, key, sizeof parent);
    }
    if (last_key) memcpy(last_key, parent, PREFIX_KEY_BYTES);
    return got;
}

int prefix_cache_match(prefix_cache *c, const int32_t *tokens, int32_t n, prefix_salt salt, int32_t *blocks,
                       int32_t cap, prefix_match *m, cf_err *err) {
    return prefix_cache_match_from(c, NULL, tokens, n, salt, blocks, cap, m, err);
}

int prefix_cache_match_from(prefix_cache *c, const uint8_t *parent, const int32_t *tokens, int32_t n, prefix_salt salt,
                            int32_t *blocks, int32_t cap, prefix_match *m, cf_err *err) {
    memset(m, 0, sizeof *m);
    if (salt.len > UINT32_MAX) return cf_fail(err, "prefix cache: salt of %zu bytes is too long", salt.len);
    int32_t got = pc_walk(c, parent, tokens, n, salt, blocks, cap < 0 ? 0 : cap, m->last_key);
    if (got < 0) { return cf_fail(err, "prefix cache: SHA-256 failed"); }
    int32_t wanted = n > 0 ? n / c->block_tokens : 0;
    c->stats.lookups += (uint64_t)(got < wanted ? got + 1 : got);
    c->stats.hits += (uint64_t)got;
    m->n_blocks = got;
    m->n_tokens = got * c->block_tokens;
    return 0;
}

int32_t prefix_cache_peek(prefix_cache *c, const int32_t *tokens, int32_t n, prefix_salt salt) {
    return prefix_cache_peek_from(c, NULL, tokens, n, salt, NULL);
}

int32_t prefix_cache_peek_from(prefix_cache *c, const uint8_t *parent, const int32_t *tokens, int32_t n,
                               prefix_salt salt, uint8_t last_key[PREFIX_KEY_BYTES]) {
    if (salt.len > UINT32_MAX) return 0;
    int32_t got = pc_walk(c, parent, tokens, n, salt, NULL, 0, last_key);
    return got > 0 ? got * c->block_tokens : 0;
}

int32_t prefix_cache_insert(prefix_cache *c, const uint8_t *parent, const int32_t *tokens, prefix_salt salt,
                            int32_t block, uint8_t key_out[PREFIX_KEY_BYTES], cf_err *err) {
    if (block < 0 || block >= c->n_blocks) return cf_fail(err, "prefix cache: block %d out of range", block);
    if (kv_pool_refs(c->pool, block) <= 0) return cf_fail(err, "prefix cache: block %d is not referenced", block);
    if (salt.len > UINT32_MAX) return cf_fail(err, "prefix cache: salt of %zu bytes is too long", salt.len);
    uint8_t key[PREFIX_KEY_BYTES];
    if (pc_hash_block(c->md, parent, tokens, c->block_tokens, c->fingerprint, salt, key))
        return cf_fail(err, "prefix cache: SHA-256 failed");
    memcpy(key_out, key, PREFIX_KEY_BYTES);
    if (c->has_key[block]) {
        if (memcmp(c->block_key[block], key, PREFIX_KEY_BYTES) == 0) return block; /* already registered */
        return cf_fail(err, "prefix cache: block %d is already cached under another key", block);
    }
    bool found = false;
    uint64_t i = pc_find(c, key, &found);
    if (found) {
        int32_t existing = c->table[i].block;
        kv_pool_ref(c->pool, existing);
        c->stats.duplicates++;
        return existing;
    }
    memcpy(c->table[i].key, key, PREFIX_KEY_BYTES);
    c->table[i].block = block;
    memcpy(c->block_key[block], key, PREFIX_KEY_BYTES);
    c->has_key[block] = 1;
    c->entries++;
    c->stats.inserts++;
    kv_pool_mark_cached(c->pool, block);
    return block;
}

int prefix_cache_key(prefix_cache *c, const uint8_t *parent, const int32_t *tokens, prefix_salt salt,
                     uint8_t out[PREFIX_KEY_BYTES]) {
    if (salt.len > UINT32_MAX) return -1;
    return pc_hash_block(c->md, parent, tokens, c->block_tokens, c->fingerprint, salt, out);
}

prefix_cache_stats prefix_cache_get_stats(const prefix_cache *c) {
    prefix_cache_stats s = c->stats;
    s.entries = c->entries;
    return s;
}

/* ---- model fingerprint ---- */

#define PC_FP_SAMPLE 64

static int pc_fp_write(void *ctx, const void *bytes, size_t n) { return EVP_DigestUpdate(ctx, bytes, n); }

static int pc_fp_u32(EVP_MD_CTX *md, uint32_t v) {
    uint8_t b[4];
    pc_put_u32(b, v);
    return EVP_DigestUpdate(md, b, 4);
}

static int pc_fp_f32(EVP_MD_CTX *md, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    return pc_fp_u32(md, v);
}

/* v1 layout: arch name[32], the shared hyper-parameters below, the
 * architecture's own (model_fp_arch_hparams: its fingerprint hook), the
 * tied-output byte. */
static int pc_fp_hparams(EVP_MD_CTX *md, const model_hparams *hp) {
    char arch[sizeof hp->arch] = {0};
    memcpy(arch, hp->arch, sizeof arch);
    arch[sizeof arch - 1] = 0;
    int ok = EVP_DigestUpdate(md, arch, sizeof arch);
    const int32_t ints[] = {hp->n_vocab,
                            hp->n_embd,
                            hp->n_layer,
                            hp->n_head,
                            hp->n_head_kv,
                            hp->head_dim,
                            hp->n_ff,
                            hp->n_ctx_train,
                            hp->rope_dim,
                            (int32_t)hp->rope_mode,
                            (int32_t)hp->rope_scaling,
                            hp->rope_orig_ctx};
    for (size_t i = 0; ok && i < sizeof ints / sizeof ints[0]; i++) ok = pc_fp_u32(md, (uint32_t)ints[i]);
    const float fl[] = {hp->rms_eps,          hp->rope_base,      hp->rope_factor,   hp->yarn_ext_factor,
                        hp->yarn_attn_factor, hp->yarn_beta_fast, hp->yarn_beta_slow};
    for (size_t i = 0; ok && i < sizeof fl / sizeof fl[0]; i++) ok = pc_fp_f32(md, fl[i]);
    model_fp_writer w = {.write = pc_fp_write, .ctx = md};
    ok = ok && model_fp_arch_hparams(hp, &w);
    uint8_t tied = hp->tied_output ? 1 : 0;
    return ok && EVP_DigestUpdate(md, &tied, 1);
}

static int pc_fp_tensor(EVP_MD_CTX *md, const gguf_tensor *t) {
    int ok = EVP_DigestUpdate(md, t->name, strlen(t->name) + 1);
    ok = ok && pc_fp_u32(md, t->type) && pc_fp_u32(md, (uint32_t)t->n_dims);
    for (int d = 0; ok && d < GGUF_MAX_DIMS; d++)
        ok = pc_fp_u32(md, (uint32_t)t->ne[d]) && pc_fp_u32(md, (uint32_t)((uint64_t)t->ne[d] >> 32));
    ok = ok && pc_fp_u32(md, (uint32_t)t->nbytes) && pc_fp_u32(md, (uint32_t)((uint64_t)t->nbytes >> 32));
    if (!ok || !t->data || t->nbytes == 0) return ok;
    const uint8_t *d = t->data;
    size_t n = t->nbytes < PC_FP_SAMPLE ? t->nbytes : PC_FP_SAMPLE;
    size_t at[3] = {0, (t->nbytes - n) / 2, t->nbytes - n};
    for (int i = 0; ok && i < 3; i++) ok = EVP_DigestUpdate(md, d + at[i], n);
    return ok;
}

int prefix_cache_fingerprint_gguf(const gguf_file *f, const model_hparams *hp, uint8_t out[PREFIX_KEY_BYTES],
                                  cf_err *err) {
    static const char tag[] = "cinfer-model-fp-v1";
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md) return cf_fail(err, "model fingerprint: out of memory");
    int ok = EVP_DigestInit_ex(md, EVP_sha256(), NULL) && EVP_DigestUpdate(md, tag, sizeof tag);
    ok = ok && pc_fp_hparams(md, hp);
    int64_t n = gguf_tensor_count(f);
    ok = ok && pc_fp_u32(md, (uint32_t)n);
    for (int64_t i = 0; ok && i < n; i++) ok = pc_fp_tensor(md, gguf_tensor_at(f, i));
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(md, out, &len) && len == PREFIX_KEY_BYTES;
    EVP_MD_CTX_free(md);
    return ok ? 0 : cf_fail(err, "model fingerprint: SHA-256 failed");
}

int prefix_cache_model_fingerprint(const model *m, uint8_t out[PREFIX_KEY_BYTES], cf_err *err) {
    return prefix_cache_fingerprint_gguf(model_get_gguf(m), model_get_hparams(m), out, err);
}

int prefix_cache_check(const prefix_cache *c, char *why, size_t cap) {
    int32_t in_table = 0, with_key = 0;
    for (uint64_t i = 0; i <= c->mask; i++) {
        const pc_entry *en = &c->table[i];
        if (en->block == PC_EMPTY) continue;
        in_table++;
        if (en->block < 0 || en->block >= c->n_blocks || !c->has_key[en->block] ||
            memcmp(c->block_key[en->block], en->key, PREFIX_KEY_BYTES))
            return snprintf(why, cap, "prefix cache: entry for block %d does not match the block's key", en->block), -1;
    }
    for (int32_t b = 0; b < c->n_blocks; b++) {
        with_key += c->has_key[b] != 0;
        if ((c->has_key[b] != 0) != kv_pool_is_cached(c->pool, b))
            return snprintf(why, cap, "prefix cache: block %d has a key %d but pool cached flag %d", b, c->has_key[b],
                            kv_pool_is_cached(c->pool, b)),
                   -1;
    }
    if (in_table != c->entries || with_key != c->entries)
        return snprintf(why, cap, "prefix cache: %d entries, %d in the table, %d blocks with a key", c->entries,
                        in_table, with_key),
               -1;
    return 0;
}
