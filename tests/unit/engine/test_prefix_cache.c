/* test_prefix_cache.c - prefix cache over a KV pool: the key encoding pinned
 * by an independent oracle (tests/oracles/prefix_key.py), chain matching
 * (1000-token prompt -> 992 cached tokens), salts and fingerprints never
 * sharing, LRU eviction order, referenced blocks never evicted, duplicate
 * insert (first writer wins), stats, and the model fingerprint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kv_pool.h"
#include "engine/prefix_cache.h"
#include "testutil.h"

#define BT 16

static kv_pool *make_pool(int32_t n_blocks) {
    kv_spec s = {.n_groups = 1};
    s.groups[0] = (kv_group_spec){.kind = KV_LAYER_FULL, .n_layers = 1, .token_floats = 2};
    cf_err err;
    kv_pool *p = NULL;
    if (kv_pool_create(&s, BT, 1 << 20, &p, &err)) return NULL;
    kv_pool_stats st = kv_pool_get_stats(p);
    kv_pool_free(p);
    int64_t per_block = st.block_bytes + 16, fixed = st.bytes - (int64_t)st.total * per_block;
    if (kv_pool_create(&s, BT, fixed + n_blocks * per_block, &p, &err)) return NULL;
    return p;
}

static void hex(const uint8_t *k, char *out) {
    for (int i = 0; i < PREFIX_KEY_BYTES; i++) sprintf(out + 2 * i, "%02x", k[i]);
}

static prefix_salt salt_of(const char *s) { return (prefix_salt){s, s ? strlen(s) : 0}; }

/* Simulates computing a sequence: allocates its blocks, registers every full
 * block (replacing duplicates by the cached copy). Returns blocks used. */
static int32_t fill_seq(prefix_cache *c, kv_pool *p, const int32_t *tok, int32_t n, prefix_salt salt, int32_t *blocks) {
    cf_err err;
    int32_t nb = (n + BT - 1) / BT;
    if (kv_pool_alloc_n(p, nb, blocks, &err)) return -1;
    uint8_t parent[PREFIX_KEY_BYTES], key[PREFIX_KEY_BYTES];
    for (int32_t i = 0; i < n / BT; i++) {
        int32_t got = prefix_cache_insert(c, i ? parent : NULL, tok + i * BT, salt, blocks[i], key, &err);
        if (got < 0) return -1;
        if (got != blocks[i]) {
            kv_pool_unref(p, blocks[i]);
            blocks[i] = got;
        }
        memcpy(parent, key, sizeof key);
    }
    return nb;
}

static void release(kv_pool *p, const int32_t *blocks, int32_t n) {
    for (int32_t i = 0; i < n; i++) kv_pool_unref(p, blocks[i]);
}

static void test_key_vectors(void) {
    uint8_t fp[32], k0[32], k1[32];
    int32_t b0[BT], b1[BT];
    for (int i = 0; i < 32; i++) fp[i] = (uint8_t)i;
    for (int i = 0; i < BT; i++) {
        b0[i] = 1000 * i - 3;
        b1[i] = 7 * i;
    }
    char h[65];
    cf_err err;
    /* from tests/oracles/prefix_key.py */
    CHECK(prefix_cache_block_key(NULL, b0, BT, fp, salt_of(""), k0, &err) == 0);
    hex(k0, h);
    CHECKF(strcmp(h, "78682d4727d1e222ab5414ac6258f1ce481b9695342283ae18800c8b3246a1d0") == 0, "%s", h);
    CHECK(prefix_cache_block_key(k0, b1, BT, fp, salt_of(NULL), k1, &err) == 0);
    hex(k1, h);
    CHECKF(strcmp(h, "fafec030598aedd562136d69f16672f0b1bd4636caf4150db3c9a549929c827d") == 0, "%s", h);
    CHECK(prefix_cache_block_key(NULL, b0, BT, fp, salt_of("tenant-a"), k0, &err) == 0);
    hex(k0, h);
    CHECKF(strcmp(h, "b1ce9ee7322e719ce21f54fbca4f25fadd3f723a3d6382f8c15d46a27ad18aea") == 0, "%s", h);
    CHECK(prefix_cache_block_key(k0, b1, BT, fp, salt_of("tenant-a"), k1, &err) == 0);
    hex(k1, h);
    CHECKF(strcmp(h, "7b45010618d14231d61df207a5e4625660e0325a60942848c3b857f676cfb8db") == 0, "%s", h);
    /* a different fingerprint gives a different key */
    uint8_t fp2[32], k2[32];
    memcpy(fp2, fp, 32);
    fp2[31] ^= 1;
    CHECK(prefix_cache_block_key(NULL, b0, BT, fp2, salt_of("tenant-a"), k2, &err) == 0);
    CHECK(memcmp(k0, k2, 32) != 0);
    CHECK(prefix_cache_block_key(NULL, b0, 0, fp, salt_of(""), k2, &err) == -1);
}

static void test_chains(void) {
    uint8_t fp[32] = {1, 2, 3}, fp2[32] = {1, 2, 4};
    kv_pool *p = make_pool(200);
    prefix_cache *c = NULL;
    cf_err err;
    CHECK(p && prefix_cache_create(p, fp, &c, &err) == 0);
    int32_t a[1200], blocks[100], got[100];
    srand(7);
    for (int i = 0; i < 1200; i++) a[i] = rand() % 32000;
    prefix_salt none = salt_of(NULL);

    int32_t nb = fill_seq(c, p, a, 1000, none, blocks);
    CHECK(nb == 63);
    CHECK(prefix_cache_get_stats(c).entries == 62);
    release(p, blocks, nb);
    kv_pool_stats st = kv_pool_get_stats(p);
    CHECK(st.cached == 62 && st.used == 0 && st.free == 200 - 62);

    /* another prompt sharing the first 1000 tokens */
    prefix_match m;
    CHECK(prefix_cache_peek(c, a, 1200, none) == 992);
    CHECK(prefix_cache_match(c, a, 1200, none, got, 100, &m, &err) == 0);
    CHECK(m.n_tokens == 992 && m.n_blocks == 62);
    CHECK(memcmp(got, blocks, 62 * sizeof(int32_t)) == 0);
    for (int i = 0; i < 62; i++) CHECK(kv_pool_refs(p, got[i]) == 1);
    CHECK(kv_pool_get_stats(p).cached == 0 && kv_pool_get_stats(p).used == 62);
    /* last_key continues the chain: inserting block 62 of the new prompt links to it */
    uint8_t k62[32], kx[32];
    int32_t nbk;
    CHECK(kv_pool_alloc(p, &nbk, &err) == 0);
    CHECK(prefix_cache_insert(c, m.last_key, a + 992, none, nbk, k62, &err) == nbk);
    CHECK(prefix_cache_block_key(m.last_key, a + 992, BT, fp, none, kx, &err) == 0 && memcmp(kx, k62, 32) == 0);
    release(p, got, 62);
    kv_pool_unref(p, nbk);
    CHECK(prefix_cache_peek(c, a, 1200, none) == 1008);

    /* the cap limits the chain; the match stops at the first miss */
    CHECK(prefix_cache_match(c, a, 1200, none, got, 5, &m, &err) == 0 && m.n_tokens == 80);
    release(p, got, 5);
    int32_t b[1000];
    memcpy(b, a, sizeof b);
    b[500] ^= 1; /* block 31 differs */
    CHECK(prefix_cache_peek(c, b, 1000, none) == 31 * BT);
    CHECK(prefix_cache_peek(c, a, 15, none) == 0);
    CHECK(prefix_cache_peek(c, a, 999, none) == 992);

    /* different salt never shares */
    CHECK(prefix_cache_peek(c, a, 1000, salt_of("tenant-a")) == 0);
    CHECK(prefix_cache_match(c, a, 1000, salt_of("tenant-a"), got, 100, &m, &err) == 0 && m.n_tokens == 0);
    nb = fill_seq(c, p, a, 1000, salt_of("tenant-a"), blocks);
    CHECK(nb == 63);
    for (int i = 0; i < 62; i++) CHECK(kv_pool_refs(p, blocks[i]) == 1); /* no sharing with the unsalted chain */
    release(p, blocks, nb);
    CHECK(prefix_cache_peek(c, a, 1000, salt_of("tenant-a")) == 992);
    CHECK(prefix_cache_peek(c, a, 1000, salt_of("tenant-b")) == 0);
    CHECK(prefix_cache_peek(c, a, 1000, none) == 992);

    /* different model fingerprint: a cache for another model on the same pool finds nothing */
    prefix_cache_free(c);
    st = kv_pool_get_stats(p);
    CHECK(st.cached == 0 && st.free == 200 && st.used == 0);
    CHECK(prefix_cache_create(p, fp2, &c, &err) == 0);
    CHECK(prefix_cache_peek(c, a, 1000, none) == 0);
    nb = fill_seq(c, p, a, 1000, none, blocks);
    release(p, blocks, nb);
    CHECK(prefix_cache_peek(c, a, 1000, none) == 992);
    prefix_cache_free(c);
    kv_pool_free(p);
}

static void test_lru_and_duplicates(void) {
    uint8_t fp[32] = {9};
    kv_pool *p = make_pool(8);
    prefix_cache *c = NULL;
    cf_err err;
    CHECK(p && kv_pool_n_blocks(p) == 8 && prefix_cache_create(p, fp, &c, &err) == 0);
    prefix_salt none = salt_of(NULL);
    int32_t t[4][BT], blk[4], tmp[8];
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < BT; i++) t[s][i] = 100 * s + i;
    for (int s = 0; s < 4; s++) CHECK(fill_seq(c, p, t[s], BT, none, &blk[s]) == 1);
    /* release a, b, c in that order; d stays referenced */
    kv_pool_unref(p, blk[0]);
    kv_pool_unref(p, blk[1]);
    kv_pool_unref(p, blk[2]);
    CHECK(kv_pool_get_stats(p).cached == 3 && kv_pool_get_stats(p).free == 4);
    /* a hit on a makes it the most recent */
    prefix_match m;
    int32_t hit;
    CHECK(prefix_cache_match(c, t[0], BT, none, &hit, 1, &m, &err) == 0 && m.n_blocks == 1 && hit == blk[0]);
    kv_pool_unref(p, hit);
    CHECK(kv_pool_lru_oldest(p) == blk[1]);
    /* free blocks go first; then eviction oldest first: b, c, a */
    CHECK(kv_pool_alloc_n(p, 4, tmp, &err) == 0);
    CHECK(prefix_cache_peek(c, t[1], BT, none) == BT);
    CHECK(kv_pool_alloc(p, &tmp[4], &err) == 0 && tmp[4] == blk[1]);
    CHECK(prefix_cache_peek(c, t[1], BT, none) == 0);
    CHECK(prefix_cache_peek(c, t[2], BT, none) == BT);
    CHECK(kv_pool_alloc(p, &tmp[5], &err) == 0 && tmp[5] == blk[2]);
    CHECK(kv_pool_alloc(p, &tmp[6], &err) == 0 && tmp[6] == blk[0]);
    CHECK(prefix_cache_peek(c, t[0], BT, none) == 0);
    CHECK(prefix_cache_get_stats(c).evictions == 3 && prefix_cache_get_stats(c).entries == 1);
    /* the referenced cached block d is never evicted: allocation fails instead */
    err.msg[0] = 0;
    CHECK(kv_pool_alloc(p, &tmp[7], &err) == -1 && err.msg[0]);
    CHECK(prefix_cache_peek(c, t[3], BT, none) == BT);
    CHECK(kv_pool_is_cached(p, blk[3]));

    /* duplicate insert: first writer wins, the second gets the cached block with a ref */
    kv_pool_unref(p, tmp[0]);
    int32_t mine;
    uint8_t key[32], key2[32];
    CHECK(kv_pool_alloc(p, &mine, &err) == 0 && mine == tmp[0]);
    int32_t r = prefix_cache_insert(c, NULL, t[3], none, mine, key, &err);
    CHECK(r == blk[3]);
    CHECK(kv_pool_refs(p, blk[3]) == 2);
    CHECK(prefix_cache_get_stats(c).duplicates == 1);
    CHECK(!kv_pool_is_cached(p, mine));
    /* re-registering the same block under its own key is a no-op; under another key an error */
    CHECK(prefix_cache_insert(c, NULL, t[3], none, blk[3], key2, &err) == blk[3] && memcmp(key, key2, 32) == 0);
    CHECK(kv_pool_refs(p, blk[3]) == 2);
    CHECK(prefix_cache_insert(c, NULL, t[0], none, blk[3], key2, &err) == -1);
    kv_pool_unref(p, mine);
    /* an unreferenced block cannot be registered */
    CHECK(prefix_cache_insert(c, NULL, t[0], none, mine, key2, &err) == -1);
    kv_pool_unref(p, blk[3]);
    kv_pool_unref(p, blk[3]);
    for (int i = 1; i < 7; i++) kv_pool_unref(p, tmp[i]);
    kv_pool_stats st = kv_pool_get_stats(p);
    CHECK(st.used == 0 && st.cached == 1 && st.free == 7);
    prefix_cache_stats ps = prefix_cache_get_stats(c);
    CHECK(ps.inserts == 4 && ps.hits == 1);
    prefix_cache_free(c);
    st = kv_pool_get_stats(p);
    CHECK(st.free == 8);
    kv_pool_free(p);
}

/* Churn on a tiny pool (8 blocks, 16 table slots: many probe collisions):
 * the table must agree with a reference model after every insert/evict. */
static void test_table_churn(void) {
    uint8_t fp[32] = {5};
    kv_pool *p = make_pool(8);
    prefix_cache *c = NULL;
    cf_err err;
    CHECK(p && prefix_cache_create(p, fp, &c, &err) == 0);
    enum { NX = 64 };
    int32_t x_block[NX], block_x[8], tok[BT] = {0};
    for (int i = 0; i < NX; i++) x_block[i] = -1;
    for (int i = 0; i < 8; i++) block_x[i] = -1;
    uint32_t s = 1;
    int bad = 0;
    for (int op = 0; op < 3000 && bad < 5; op++) {
        s = s * 1103515245u + 12345u;
        int x = (int)((s >> 16) % NX);
        tok[0] = x;
        if (x_block[x] >= 0) { /* hit: take and drop a reference */
            prefix_match m;
            int32_t b = -1;
            CHECK(prefix_cache_match(c, tok, BT, salt_of(NULL), &b, 1, &m, &err) == 0);
            if (b != x_block[x]) bad++;
            kv_pool_unref(p, b);
        } else { /* miss: allocate (maybe evicting), register, release */
            int32_t b;
            uint8_t key[32];
            CHECK(kv_pool_alloc(p, &b, &err) == 0);
            if (block_x[b] >= 0) x_block[block_x[b]] = -1; /* evicted */
            CHECK(prefix_cache_insert(c, NULL, tok, salt_of(NULL), b, key, &err) == b);
            x_block[x] = b;
            block_x[b] = x;
            kv_pool_unref(p, b);
        }
        for (int y = 0; y < NX; y++) {
            tok[0] = y;
            if ((prefix_cache_peek(c, tok, BT, salt_of(NULL)) == BT) != (x_block[y] >= 0)) bad++;
        }
        if (prefix_cache_get_stats(c).entries != 8 - kv_pool_get_stats(p).free) bad++;
    }
    CHECKF(bad == 0, "%d disagreements with the reference model", bad);
    CHECK(prefix_cache_get_stats(c).evictions > 100);
    prefix_cache_free(c);
    kv_pool_free(p);
}

static void test_fingerprint(void) {
    cf_err err = {{0}};
    model *m = NULL;
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) {
        tu_missing_fixture(err.msg); /* test_finish reports it */
        return;
    }
    uint8_t a[32], b[32];
    CHECK(prefix_cache_model_fingerprint(m, a, &err) == 0);
    CHECK(prefix_cache_model_fingerprint(m, b, &err) == 0);
    CHECK(memcmp(a, b, 32) == 0);
    model_hparams hp = *model_get_hparams(m);
    hp.rope_base *= 2;
    CHECK(prefix_cache_fingerprint_gguf(model_get_gguf(m), &hp, b, &err) == 0);
    CHECK(memcmp(a, b, 32) != 0);
    /* the pool's block size from the model's spec matches the forward pass layout */
    kv_spec s;
    CHECK(kv_spec_from_model(m, &s, &err) == 0);
    CHECK(kv_spec_block_floats(&s, 16) == model_kv_block_floats(m, 16));
    model_free(m);
}

int main(void) {
    test_key_vectors();
    test_chains();
    test_lru_and_duplicates();
    test_table_churn();
    test_fingerprint();
    return test_finish();
}
