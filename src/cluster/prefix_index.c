/* prefix_index.c - see prefix_index.h. Hash: FNV-1a over 8-byte words with
 * a splitmix64 finaliser (routing estimate only; a collision misroutes, it
 * never changes an answer). Probe window: 8 slots. */
#include "cluster/prefix_index.h"

#include <stdlib.h>
#include <string.h>

enum { PREFIX_PROBE = 8 };

static uint64_t prefix_fmix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t prefix_hash_bytes(uint64_t seed, const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL ^ prefix_fmix(seed + n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    h = prefix_fmix(h);
    return h ? h : 1; /* 0 marks an empty slot */
}

int32_t prefix_chain(const char *tenant, size_t tenant_len, const char *prompt, size_t len, uint64_t *out,
                     int32_t cap) {
    uint64_t h = prefix_hash_bytes(0x7e4a, tenant ? tenant : "", tenant ? tenant_len : 0);
    int32_t n = 0;
    for (size_t off = 0; off + PREFIX_CHUNK_BYTES <= len && n < cap; off += PREFIX_CHUNK_BYTES)
        out[n++] = h = prefix_hash_bytes(h, prompt + off, PREFIX_CHUNK_BYTES);
    return n;
}

int prefix_index_init(prefix_index *ix, int32_t n_workers, int32_t slots_per_worker) {
    memset(ix, 0, sizeof *ix);
    int32_t s = PREFIX_PROBE;
    while (s < slots_per_worker && s < (1 << 24)) s <<= 1;
    size_t total = (size_t)(n_workers > 0 ? n_workers : 1) * (size_t)s;
    ix->hash = calloc(total, sizeof *ix->hash);
    ix->stamp = calloc(total, sizeof *ix->stamp);
    if (!ix->hash || !ix->stamp) {
        prefix_index_free(ix);
        return -1;
    }
    ix->n_workers = n_workers;
    ix->slots_per_worker = s;
    return 0;
}

void prefix_index_free(prefix_index *ix) {
    free(ix->hash);
    free(ix->stamp);
    memset(ix, 0, sizeof *ix);
}

static uint64_t *prefix_row(const prefix_index *ix, int32_t worker) {
    return ix->hash + (size_t)worker * (size_t)ix->slots_per_worker;
}

static int32_t prefix_find(const prefix_index *ix, int32_t worker, uint64_t h) {
    const uint64_t *row = prefix_row(ix, worker);
    uint32_t mask = (uint32_t)ix->slots_per_worker - 1;
    for (uint32_t k = 0; k < PREFIX_PROBE; k++) {
        uint32_t s = ((uint32_t)h + k) & mask;
        if (row[s] == h) return (int32_t)s;
    }
    return -1;
}

void prefix_index_insert(prefix_index *ix, int32_t worker, const uint64_t *chain, int32_t n) {
    if (worker < 0 || worker >= ix->n_workers) return;
    uint64_t *row = prefix_row(ix, worker);
    uint64_t *stamp = ix->stamp + (size_t)worker * (size_t)ix->slots_per_worker;
    uint32_t mask = (uint32_t)ix->slots_per_worker - 1;
    for (int32_t i = 0; i < n; i++) {
        uint64_t h = chain[i];
        int32_t at = prefix_find(ix, worker, h);
        if (at < 0) { /* an empty slot in the window, else the oldest */
            uint32_t victim = (uint32_t)h & mask;
            for (uint32_t k = 0; k < PREFIX_PROBE; k++) {
                uint32_t s = ((uint32_t)h + k) & mask;
                if (row[s] == 0) {
                    victim = s;
                    break;
                }
                if (stamp[s] < stamp[victim]) victim = s;
            }
            at = (int32_t)victim;
            row[at] = h;
        }
        stamp[at] = ++ix->clock;
    }
}

int32_t prefix_index_match(const prefix_index *ix, int32_t worker, const uint64_t *chain, int32_t n) {
    if (worker < 0 || worker >= ix->n_workers) return 0;
    int32_t i = 0;
    while (i < n && prefix_find(ix, worker, chain[i]) >= 0) i++;
    return i;
}

void prefix_index_clear_worker(prefix_index *ix, int32_t worker) {
    if (worker < 0 || worker >= ix->n_workers) return;
    memset(prefix_row(ix, worker), 0, (size_t)ix->slots_per_worker * sizeof *ix->hash);
    memset(ix->stamp + (size_t)worker * (size_t)ix->slots_per_worker, 0,
           (size_t)ix->slots_per_worker * sizeof *ix->stamp);
}
